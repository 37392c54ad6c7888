"""Longer windows on shared CPUs beside the 3-step sweeps: vgg11, resnet50 and alexnet at
N = 4, 10 Gbit/s, 15-20 steps per worker, and the planner's predictions of them from the
zoo's calibration."""

from lab.experiments._common import bench, netns, validate
from lab.registry import Lab, Step

SUMMARY = "steady shared-CPU windows at 10 Gbit/s against the short sweeps, and predicted"
NEEDS = ("root", "horovod")


def steps(lab: Lab) -> list[Step]:
    shape = ("--devices", "4", "--batch-size", "8", "--image-size", "75", "--warmup", "2",
             "--device-cpus", "shared")
    files = [lab.path("bench_steady_10gbit.json"), lab.path("bench_steady_vgg11_10gbit.json")]
    profile = ("--compute-profile", lab.of("plan-calibration", "plan_calibration.json"))
    return [bench(lab, *netns("10gbit"), "--models", "vgg11", "--modes", "ralp-h", "ps", *shape,
                  "--steps", "20", "--out", files[1]),
            bench(lab, *netns("10gbit"), "--models", "resnet50", "alexnet", "--modes", "ps",
                  "ralp-n", "horovod", *shape, "--steps", "15", "--out", files[0]),
            validate(lab, *files, *profile, stdout=lab.path("plan_validation_steady.txt")),
            validate(lab, *files, *profile, "--format", "json",
                     stdout=lab.path("plan_validation_steady.json"))]
