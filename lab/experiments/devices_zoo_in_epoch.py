"""The PS modes of the budgeted zoo again, each window inside its warm-up's epoch (3 warm-up
steps per worker, 6 measured), 3 interleaved rounds, each workload calibrated first:
windows in the epoch's first cycles, for the planner's in-step model (planner-devices)."""

from lab.experiments._common import SMALL, ZOO, bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "the zoo's PS modes inside the epoch's first cycles, budgeted and calibrated"
NEEDS = ("root",)
SETTINGS = {"n8-500mbit": "N = 8, 500 Mbit/s", "n4-1gbit": "N = 4, 1 Gbit/s",
            "n4-500mbit": "N = 4, 500 Mbit/s", "n8-1gbit": "N = 8, 1 Gbit/s (no record yet)"}


def steps(lab: Lab) -> list[Step]:
    devices, rate = lab.setting.split("-")
    return [bench(lab, *netns(rate), "--models", *ZOO, *SMALL, "--modes", "ps", "ralp-h",
                  "ralp-n", "--devices", devices.removeprefix("n"), "--steps", "6", "--warmup",
                  "3", "--repeat", "3", "--calibrate", "--quiet",
                  *outputs(lab, f"devices_zoo_{devices}_{rate}_in_epoch"), may_fail=True)]
