"""RALP-N against Horovod's ring allreduce and plain PS on three models, N = 4 and 8, one link
rate per setting, shared CPUs as recorded."""

from lab.experiments._common import SMALL, bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "RALP-N vs Horovod vs plain PS, 3 models, N = 4 and 8 (shared CPUs)"
NEEDS = ("root", "horovod")
SETTINGS = {"1gbit": "every link at 1 Gbit/s", "10gbit": "every link at 10 Gbit/s"}


def steps(lab: Lab) -> list[Step]:
    rate = lab.setting
    return [bench(lab, *netns(rate), "--models", "vgg11", "alexnet", "resnet50", *SMALL,
                  "--modes", "ps", "ralp-n", "horovod", "--devices", "4", "8", "--steps", "3",
                  "--device-cpus", "shared", "--quiet", *outputs(lab, f"bench_horovod_{rate}"),
                  may_fail=True)]
