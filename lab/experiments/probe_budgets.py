"""How long the FLOP-rate probe behind ralp.wrap's default decision should run and on how deep
a stack, and how the probe as TensorFlow ops compares with Keras layers. The settings were
chosen and the probe script deleted."""

from lab.registry import Lab, Step

SUMMARY = "the FLOP-rate probe's settings, and as TensorFlow ops against Keras layers"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
