"""Does the planner give the same best mode with and without a calibration on this host?
Each zoo model and two models outside it, on 4 and 16 machines at 1 and 10 Gbit/s, planned
as a user would: once measuring the model in the planner's own process, once from
``--calibrate`` then ``--compute-profile`` (lab/tools/calibrated_paths.py)."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "the planner's best mode with and without a calibration, per model and cluster"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "calibrated_paths", "--output", lab.path("calibrated_paths.json"))]
