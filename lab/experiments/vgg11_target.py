"""vgg11 at its full size where plain PS is network-bound: RALP's gain over plain PS, the
bytes each link carries against the byte model, and how close each mode runs to its bound
(each workload calibrated beside its runs). The record predates CPU
budgets, so the run shares the host's CPUs as it did."""

from lab.experiments._common import bench, netns, outputs
from lab.registry import Lab, Step

SUMMARY = "vgg11 at 224 px, N = 4, 250 Mbit/s: RALP against plain PS, bytes and bounds"
NEEDS = ("root",)


def steps(lab: Lab) -> list[Step]:
    return [bench(lab, *netns("250mbit"), "--models", "vgg11", "--batch-size", "4",
                  "--modes", "ps", "ralp-h", "ralp-n", "--devices", "4", "--steps", "3",
                  "--warmup", "1", "--device-cpus", "shared", "--quiet",
                  *outputs(lab, "bench_vgg11_target"))]
