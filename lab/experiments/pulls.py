"""Plain PS's pull schedules (TensorFlow's default, one batch per layer, iBatch) in the bench,
N = 4 (2 workers + 2 PS), each schedule a fresh cluster, worker 0 traced after measuring to
find how much pull time hides behind compute. Shared CPUs, as recorded."""

from lab.experiments._common import SMALL, bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "plain PS pull schedules default / layer / ibatch, vgg11 and alexnet, N = 4"
NEEDS = ("root",)
SETTINGS = {"250mbit": "network-bound", "1gbit": "network-bound",
            "10gbit": "compute-bound"}


def steps(lab: Lab) -> list[Step]:
    rate = lab.setting
    return [bench(lab, *netns(rate), "--models", "vgg11", "alexnet", *SMALL, "--modes", "ps",
                  "--devices", "4", "--steps", "4", "--warmup", "1", "--pull-schedule",
                  "default", "layer", "ibatch", "--trace-pulls",
                  "--device-cpus", "shared", "--quiet", *outputs(lab, f"pulls_{rate}"),
                  may_fail=True)]
