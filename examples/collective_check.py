"""Check mode "collective" (ralp.wrap) on this host: W local workers train a zoo model for a few steps
with TensorFlow's own allreduce, then compare their weights and print images/s.

    python examples/collective_check.py --workers 2 --model alexnet --steps 20
    python examples/collective_check.py --workers 2 --gpus      # a GPU host: NCCL

With ``--gpus`` worker k sees only GPU k (CUDA_VISIBLE_DEVICES) and the collectives use NCCL;
that needs a GPU build of TensorFlow (``tensorflow[and-cuda]``) and one GPU per worker, and it
has not been run by ralp's tests (they run on CPUs). Without it every worker runs on the CPU
and the ring allreduce goes over gRPC on loopback.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time

import numpy as np

MARK = "COLLECTIVE_CHECK "


def worker(model_name: str, steps: int, batch: int, image: int, gpus: bool) -> None:
    import ralp

    def build():
        from ralp.models import build_model

        return build_model(model_name, num_classes=1000, image_size=image)

    # a function: the model is built in the strategy's scope (no restart of TensorFlow)
    trainer = ralp.wrap(build, mode="collective")
    import tensorflow as tf

    runtime = trainer.runtime
    rng = np.random.default_rng(0)
    rows = runtime.size * batch  # the global batch: each worker trains on its batch rows
    x = rng.normal(size=(rows, image, image, 3)).astype("float32")
    y = rng.integers(0, 1000, size=rows).astype("int32")
    trainer.fit(x, y, batch_size=rows, steps_per_epoch=2, verbose=0)  # warm-up: tracing
    start = time.perf_counter()
    trainer.fit(x, y, batch_size=rows, steps_per_epoch=steps, verbose=0)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256(b"".join(w.tobytes() for w in trainer.get_weights())).hexdigest()[:16]
    devices = [d.name for d in tf.config.list_logical_devices() if d.device_type != "CPU"]
    print(MARK + json.dumps({"rank": runtime.rank, "weights": digest, "devices": devices,
                             "images_per_sec": rows * steps / seconds}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--model", default="alexnet")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=75)
    parser.add_argument("--gpus", action="store_true", help="one GPU per worker, NCCL")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.model, args.steps, args.batch_size, args.image_size, args.gpus)
        sys.stdout.flush()
        import os

        os._exit(0)  # TensorFlow's collective server cannot stop cleanly
    from ralp.collective.launch import run_workers
    from ralp.collective.runtime import CollectiveError

    command = [sys.executable, __file__, "--worker", "--model", args.model, "--steps",
               str(args.steps), "--batch-size", str(args.batch_size), "--image-size",
               str(args.image_size), *(["--gpus"] if args.gpus else [])]
    envs = None if args.gpus else {"CUDA_VISIBLE_DEVICES": "-1"}
    try:
        results = run_workers(command, args.workers, env=envs, per_worker_env=(
            [{"CUDA_VISIBLE_DEVICES": str(k)} for k in range(args.workers)] if args.gpus
            else None))
    except CollectiveError as e:
        tail = getattr(e, "output", "").splitlines()[-40:]  # where it failed, not only how
        print("\n".join([*tail, f"collective_check: {e}"]), file=sys.stderr)
        return 1
    reports = [json.loads(line.split(MARK, 1)[1]) for r in results
               for line in r.output.splitlines() if MARK in line]
    for r in sorted(reports, key=lambda r: r["rank"]):
        print(f"worker {r['rank']}: weights {r['weights']}, devices {r['devices'] or ['CPU']}, "
              f"{r['images_per_sec']:.1f} images/s")
    same = len({r["weights"] for r in reports}) == 1 and len(reports) == args.workers
    print("replicas identical after training" if same else "REPLICAS DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
