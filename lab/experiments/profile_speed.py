"""How long the profiler takes on resnet50 and vgg19 at their default sizes, building the model
apart. The target was met; the script was deleted."""

from lab.registry import Lab, Step

SUMMARY = "how long profiling takes for resnet50 and vgg19 (target met)"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
