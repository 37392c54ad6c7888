"""RALP's workers on one PS task: one worker alone (N = 2) beside two (RALP-H, 2 + 1) and
three (RALP-N, 3 + 1), every device at N = 4's budget, 1 Gbit/s, past the epoch's first
cycles, interleaved and calibrated: do workers on one PS task take turns, each stepping as
alone? planner-devices validates the runs."""

from lab.experiments._common import SMALL, bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "one, two and three RALP workers on one PS task, budgeted, 1 Gbit/s"
NEEDS = ("root",)
SETTINGS = {"both": "resnet50 and overfeat in one run (the run that was stopped early)",
            "resnet50": "resnet50 alone, 3 rounds", "overfeat": "overfeat alone, 3 rounds"}


def steps(lab: Lab) -> list[Step]:
    models = ("resnet50", "overfeat") if lab.setting == "both" else (lab.setting,)
    stem = ("devices_two_workers_1gbit" if lab.setting == "both"
            else f"devices_two_workers_{lab.setting}_1gbit")
    return [bench(lab, *netns("1gbit"), "--models", *models, *SMALL, "--modes", "ralp-h",
                  "ralp-n", "--devices", "2", "4", "--device-cpus", "0.425", "--steps", "12",
                  "--warmup", "16", "--repeat", "3", "--calibrate", "--quiet",
                  *outputs(lab, stem), may_fail=True)]
