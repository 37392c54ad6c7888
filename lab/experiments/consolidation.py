"""Workload consolidation: two jobs of four devices whose worker-PS traffic crosses one shared
1 Gbit/s trunk, every job plain PS, every job RALP-N, and one of each. Shared CPUs, as the
records were made."""

from lab.experiments._common import bench, netns
from lab.registry import Lab, Step

SUMMARY = "two 4-device jobs over one 1 Gbit/s trunk: all PS, all RALP, mixed (shared CPUs)"
NEEDS = ("root",)

JOBS = (("vgg11",), ("resnet50",), ("vgg11", "resnet50"))


def steps(lab: Lab) -> list[Step]:
    return [bench(lab, *netns("1gbit"), "--jobs", "2", "--models", *models, "--image-size", "64",
                  "--batch-size", "8", "--steps", "4", "--device-cpus", "shared", "--quiet",
                  "--out", lab.path(f"bench_consolidation_{'-'.join(models)}.json"))
            for models in JOBS]
