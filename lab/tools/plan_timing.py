"""How long planning takes once a model is calibrated.

Per zoo model, in one process after TensorFlow is imported: building the Keras model (what a
user of ``ralp.wrap`` has done already; ``python -m ralp.planner --model`` does it), profiling it
(the layer table, the split, the byte model's inputs), and predicting every mode on
N = 4..128 machines at two bandwidths with the planner's core (the plan behind ``python -m
ralp.planner ... --devices 4 8 16 32 64 128 --compute-profile FILE``). Planning is the profile and the predictions. Run under the CPU lock:

    .venv/bin/python -m lab.tools.plan_timing \
        --compute-profile lab/results/plan-calibration/plan_calibration.json
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compute-profile", required=True)
    p.add_argument("--models", nargs="+",
                   default=["vgg11", "alexnet", "overfeat", "resnet50", "inception3"])
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=75)
    args = p.parse_args()
    import tensorflow  # noqa: F401  - imported before timing: start-up is not planning

    from lab.planner.host_calibration import HostCalibration
    from ralp.models import build_model
    from ralp.planner.cluster_plan import plan_cluster
    from ralp.planner.modes import MODES
    from ralp.planner.workload import Workload
    from ralp.profiler.api import profile
    from ralp.units import parse_bandwidth

    cal = HostCalibration.load(args.compute_profile)
    devices, bits = [4, 8, 16, 32, 64, 128], [parse_bandwidth(b) for b in ("10gbit", "25gbit")]
    print(f"{'model':<11} {'build s':>8} {'profile s':>10} {'predict s':>10} {'planning s':>10} "
          f"{'with build s':>12} predictions")
    for name in args.models:
        start = time.perf_counter()
        model = build_model(name, 1000, args.image_size)
        built = time.perf_counter()
        work = Workload(profile(model, args.batch_size))
        profiled = time.perf_counter()
        entry = cal.find(name, args.batch_size, args.image_size, 1000)
        rec = plan_cluster(work, None, entry.compute, nodes=devices, gpus_per_node=1,
                           bandwidths=bits, intra_bits=float("inf"), modes=MODES,
                           sync="async", horovod_build="nccl", source=name, on_gpus=False)
        done = time.perf_counter()
        print(f"{name:<11} {built - start:>8.2f} {profiled - built:>10.3f} {done - profiled:>10.3f} "
              f"{done - built:>10.3f} {done - start:>12.2f} {len(rec.predictions)}")


if __name__ == "__main__":
    main()
