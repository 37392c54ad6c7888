"""Does a shaped link of the simulated fabric carry gRPC transfers both ways at once? One
worker and one PS task copying a variable as a pull, a push and both together, interleaved.
It does; the probe was deleted."""

from lab.registry import Lab, Step

SUMMARY = "does a shaped link carry a pull and a push at once? (yes)"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
