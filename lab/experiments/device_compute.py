"""One budgeted device's training step for each zoo model at N = 4 and 8, and the link rates
at which plain PS's transfers would take 50% and 90% of its step (the papers' testbeds):
how the budgeted zoo's link rates were chosen (lab/tools/device_compute.py)."""

from lab.experiments._common import SMALL, ZOO, tool
from lab.registry import Lab, Step

SUMMARY = "one budgeted device's step per zoo model, and the link rates for a 50-90% share"
NEEDS = ("root",)


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "device_compute", "--models", *ZOO, "--devices", "4", "8", *SMALL,
                 "--out", lab.path("device_compute.json"))]
