"""Five zoo models scaled to 75 px, plain PS against RALP-H and RALP-N at N = 4 and 8, one
link rate per setting. Short windows (3 steps per worker) on shared CPUs, as recorded."""

from lab.experiments._common import SMALL, ZOO, bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "five models at 75 px, N = 4 and 8: plain PS, RALP-H, RALP-N (shared CPUs)"
NEEDS = ("root",)
SETTINGS = {"1gbit": "every link at 1 Gbit/s", "10gbit": "every link at 10 Gbit/s"}


def steps(lab: Lab) -> list[Step]:
    rate = lab.setting
    return [bench(lab, *netns(rate), "--models", *ZOO, *SMALL, "--modes", "ps", "ralp-h",
                  "ralp-n", "--devices", "4", "8", "--steps", "3", "--device-cpus", "shared",
                  "--quiet", *outputs(lab, f"bench_sweep_{rate}"), may_fail=True)]
