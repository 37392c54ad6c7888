"""Does a shorter CFS period (a throttled task waits less) make budgeted runs at 10 Gbit/s
repeat better? Rounds of the bench with 10 ms and 2.5 ms periods interleaved, through a
wrapper that set every device's period. It did not, so the default period stayed and the
wrapper was deleted."""

from lab.registry import Lab, Step

SUMMARY = "does a shorter CFS period make budgeted runs repeat better? (no)"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
