"""Where the first PS training step's time goes (lab/tools/first_step.py): EfficientNetB0 and
MobileNetV3Small at 64 px, modes ps and ralp on LocalCluster(workers=2, ps=1), at 2,048
images (arrays), three interleaved rounds, each task's graph optimization logged. The same
tool run from a copy of the tree before the fixes: lab/results/first-step/README.md."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "the first PS step's one-time work: trace, clone, data sent, graph optimization"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "first_step", "--models", "efficientnetb0", "mobilenetv3small",
                 "--modes", "ps", "ralp", "--samples", "2048", "--repeat", "3", "--vlog",
                 "--out", lab.path("first_step.json"), stdout=lab.path("first_step.txt"))]
