"""ImageNet-22K's classes enlarge vgg11's last FC layer: how RALP's gain over plain PS grows
with the part of the model it moves to the PS. Shared CPUs, as the record was made."""

from lab.experiments._common import bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "vgg11 with 21841 classes, N = 4, 1 Gbit/s: the PS modes (shared CPUs)"
NEEDS = ("root",)


def steps(lab: Lab) -> list[Step]:
    return [bench(lab, *netns("1gbit"), "--models", "vgg11", "--image-size", "64",
                  "--batch-size", "8", "--num-classes", "21841", "--modes", "ps", "ralp-h",
                  "ralp-n", "--devices", "4", "--steps", "4", "--device-cpus", "shared",
                  "--quiet", *outputs(lab, "bench_22k"))]
