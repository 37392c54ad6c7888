"""ralp.wrap's default decision per zoo model with no calibration: what it decides for
3 workers + 1 PS at 1 Gbit/s and how long the build, the FLOP-rate probe and the decision
take, each round with a first probe of its own (lab/tools/decide_timing.py). Needs a quiet
machine: it times a probe."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "ralp.wrap's default decision per zoo model: its pick and how long it takes"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "decide_timing", "--devices", "4", "--bandwidth", "1gbit", "--repeat", "3",
                 "--out", lab.path("decide_timing.json"))]
