"""Where the first PS training step's time went: EfficientNetB0 and MobileNetV3Small at 64
px, modes ps and ralp on LocalCluster(workers=2, ps=1), at 2,048 images (arrays), three
interleaved rounds before and after the fixes, each task's graph optimization logged. Its tool
timed the runtime's own calls from inside (private methods and attributes); the package's wall
lets the lab use only public names, so the tool was deleted: lab/results/first-step/README.md."""

from lab.registry import Lab, Step

SUMMARY = "the first PS step's one-time work: trace, clone, data sent, graph optimization"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
