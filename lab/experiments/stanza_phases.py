"""Where a Stanza step's time goes: one calibrated Stanza run per model with Horovod's
timeline on, its steps cut into phases (heads, tail, exchange, rings) beside the planner's
phases for the same record (lab/tools/stanza_phase_times.py). Shared CPUs."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "Stanza's step cut into phases from Horovod's timeline, beside the planner's"
NEEDS = ("root", "horovod")


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "stanza_phase_times", "--models", "alexnet", "vgg11", "resnet50",
                 "--bandwidth", "10gbit", "--out", lab.path("stanza_phases_10gbit.json"))]
