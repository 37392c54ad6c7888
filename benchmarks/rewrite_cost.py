"""What placement costs, against one training step (issue 3 target: under 5% for vgg19).

On a local cluster (1 worker, 1 PS), in a fresh coordinator process per mode:

- ``plan_s``: profiling the model and making the plan;
- ``device_fn_s``: all calls of the RALP device function while the step is traced (the
  rewriting proper: it decides every op's device);
- ``first_step_s`` - ``step_s``: tracing and instantiating the step on the cluster, the
  one-off cost RALP and plain PS both pay; the difference between the modes is what
  placement adds to it;
- ``clone_s``: re-creating the model in the strategy's scope and copying its weights to the
  PS (both modes do it: it is how a user's model reaches the cluster);
- ``step_s``: the median of the measured steps.

    .venv/bin/python benchmarks/rewrite_cost.py [--model vgg19] [--image-size 224] [--batch-size 16]
        [--steps 5] [--out benchmarks/results/rewrite_cost.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time


def measure(spec, model_name: str, image_size: int, batch: int, steps: int, mode: str) -> dict:
    import keras
    import tensorflow as tf

    import ralp
    from ralp.placement import rewriter
    from ralp.placement.choose import choose_plan
    from ralp.ps_strategy import trainer as trainer_module

    keras.utils.set_random_seed(0)
    model = ralp.build_model(model_name, image_size=image_size)

    timings = {"device_fn_s": 0.0, "device_fn_calls": 0}
    original_call = rewriter.LayerDeviceFunction.__call__

    def timed_call(self, op):
        start = time.perf_counter()
        try:
            return original_call(self, op)
        finally:
            timings["device_fn_s"] += time.perf_counter() - start
            timings["device_fn_calls"] += 1

    rewriter.LayerDeviceFunction.__call__ = timed_call
    original_clone = trainer_module.placed_clone

    def timed_clone(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original_clone(*args, **kwargs)
        finally:
            timings["clone_s"] = time.perf_counter() - start

    trainer_module.placed_clone = timed_clone
    start = time.perf_counter()
    plan = choose_plan(model, mode, workers=1, num_ps=1, batch_size=batch).plan
    timings["plan_s"] = time.perf_counter() - start
    start = time.perf_counter()
    trainer = ralp.wrap(
        model, spec, mode=mode, plan=None if mode == "ps" else plan, batch_size=batch
    )
    timings["wrap_s"] = time.perf_counter() - start

    def dataset_fn(_context=None):
        images = tf.random.stateless_uniform((batch, image_size, image_size, 3), (0, 1))
        labels = tf.random.stateless_uniform((batch,), (0, 2), maxval=1000, dtype=tf.int32)
        return tf.data.Dataset.from_tensors((images, labels)).repeat()

    start = time.perf_counter()
    trainer.fit(dataset_fn, steps_per_epoch=1, batch_size=batch, verbose=0)
    timings["first_step_s"] = time.perf_counter() - start
    per_step = []
    for _ in range(steps):
        start = time.perf_counter()
        trainer.fit(dataset_fn, steps_per_epoch=1, batch_size=batch, verbose=0)
        per_step.append(time.perf_counter() - start)
    timings["step_s"] = statistics.median(per_step)
    timings["trace_and_instantiate_s"] = timings["first_step_s"] - timings["step_s"]
    timings["mode"] = trainer.mode
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vgg19")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()

    from ralp import LocalCluster, run_in_fresh_process

    results = {}
    for mode in ("ralp", "ps"):
        with LocalCluster(workers=1, ps=1) as cluster:
            results[mode] = run_in_fresh_process(measure, cluster.spec, args.model, args.image_size,
                                                 args.batch_size, args.steps, mode, timeout=3000)
    ralp_t, ps_t = results["ralp"], results["ps"]
    summary = {
        "device_fn_share_of_step": ralp_t["device_fn_s"] / ralp_t["step_s"],
        "plan_share_of_step": ralp_t["plan_s"] / ralp_t["step_s"],
        "extra_trace_vs_ps_share_of_step": (ralp_t["trace_and_instantiate_s"] - ps_t["trace_and_instantiate_s"]) / ralp_t["step_s"],
        "trace_and_instantiate_share_of_step": ralp_t["trace_and_instantiate_s"] / ralp_t["step_s"],
    }
    for mode, t in results.items():
        print(f"{mode:5s} plan {t['plan_s']:.3f} s  clone {t['clone_s']:.2f} s  device fn "
              f"{t['device_fn_s'] * 1e3:.1f} ms ({t['device_fn_calls']} calls)  first step "
              f"{t['first_step_s']:.2f} s  step {t['step_s']:.2f} s  trace+instantiate "
              f"{t['trace_and_instantiate_s']:.2f} s")
    for key, value in summary.items():
        print(f"{key:40s} {value:8.2%}")
    if args.out:
        record = {"command": "python benchmarks/rewrite_cost.py " + " ".join(
                      f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out" and v is not None),
                  "machine": f"{platform.machine()}, {os.cpu_count()} cores", "results": results,
                  "summary": summary}
        with open(args.out, "w") as f:
            json.dump(record, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
