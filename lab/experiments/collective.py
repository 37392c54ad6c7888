"""TensorFlow's own allreduce (mode collective) beside Horovod, plain PS and RALP-N on
budgeted devices, vgg11, alexnet and resnet50 at 75 px, 3 interleaved rounds; at N = 8 each
workload is calibrated inside one device's budget first (planner-devices validates them)."""

from lab.experiments._common import SMALL, bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "TensorFlow's allreduce beside Horovod, plain PS and RALP-N, N = 4 and 8, budgeted"
NEEDS = ("root", "horovod")
SETTINGS = {"n4-1gbit": "N = 4, 1 Gbit/s", "n4-10gbit": "N = 4, 10 Gbit/s",
            "n8-1gbit": "N = 8, 1 Gbit/s, calibrated",
            "n8-10gbit": "N = 8, 10 Gbit/s, calibrated"}


def steps(lab: Lab) -> list[Step]:
    devices, rate = lab.setting.split("-")
    n8 = devices == "n8"
    stem = f"collective_n8_{rate}" if n8 else f"collective_{rate}"
    return [bench(lab, *netns(rate), "--models", "alexnet", "vgg11", "resnet50", *SMALL,
                  "--modes", "ps", "ralp-n", "horovod", "collective", "--devices",
                  devices.removeprefix("n"), "--steps", "10", "--repeat", "3",
                  *(("--calibrate",) if n8 else ()), "--quiet", *outputs(lab, stem),
                  may_fail=True)]
