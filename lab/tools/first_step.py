"""Where the first training step's time goes, for ``keras.applications`` networks on a local
PS cluster (``LocalCluster(workers=2, ps=1)``), in modes ps and ralp.

Each (network, mode) runs in a fresh coordinator process (ParameterServerStrategy binds a
process to its cluster) with the product's own calls, each timed from outside:

- ``profile``: the profiler and the plan (``choose_plan``); ``connect``: the strategy;
- ``clone``: the placed clone in the strategy's scope with the model's weights
  (``placed_clone``); ``optimizers``: the optimizers built on the PS;
- ``dataset``: ``begin`` (the steps' functions made, each worker's dataset function traced
  here), then ``dataset_sent``: the per-worker datasets made on the workers (their graphs,
  the arrays as constants, sent; waited for with ``coordinator.join``);
- ``trace``: the step traced on the coordinator (``get_concrete_function`` with the
  arguments ``ClusterCoordinator.schedule`` traces with: the same cache entry);
- ``first_step``: the first step on each worker (its function sent, instantiated and
  optimized there, then run), one step on each worker at once, as the schedule does;
- ``step``: the median of the next steps (``--steps``), one worker at a time.

With ``--vlog`` the workers log TensorFlow's graph optimizer (grappler) passes, and the tool
adds up each task's passes (``worker0_grappler_s``...): every process is then spawned, not
forked from the zygote, so that TensorFlow reads the logging settings as it starts.

To measure another version of ralp, run this file from a copy of that version's tree
(``git archive COMMIT | tar -x -C DIR``, the file copied into ``DIR/lab/tools/``), from
``DIR``: it times the calls by their names, which have not changed.

    python -m lab.tools.first_step --models efficientnetb0 mobilenetv3small \\
        --modes ps ralp --out lab/results/first-step/first_step.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

NETWORKS = {
    "efficientnetb0": "EfficientNetB0",
    "mobilenetv3small": "MobileNetV3Small",
    "resnet50v2": "ResNet50V2",
    "densenet121": "DenseNet121",
    "convnexttiny": "ConvNeXtTiny",
}


def build(name: str, image: int, classes: int):
    import keras

    make = getattr(keras.applications, NETWORKS[name])
    model = make(weights=None, input_shape=(image, image, 3), classes=classes)
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def data(samples: int, image: int, classes: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, image, image, 3)).astype("float32")
    y = rng.integers(0, classes, size=(samples,)).astype("int32")
    return x, y


class Clock:
    """Seconds spent in named calls (patched in place: this process only)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def wrap(self, owner, attribute: str, name: str) -> None:
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - began

        setattr(owner, attribute, timed)


def job(spec_json: str, network: str, mode: str, samples: int, image: int, steps: int,
        profile_trace: str | None = None, autograph: bool = True) -> dict:
    """In the coordinator process: wrap, begin, trace, first step and steady steps timed.
    ``autograph=False``: the steps traced without AutoGraph (an experiment's knob: this
    process's ``tf.function`` is replaced)."""
    import functools

    import tensorflow as tf

    if not autograph:
        tf.function = functools.partial(tf.function, autograph=False)

    import ralp
    import ralp.placement.choose as choose
    import ralp.ps_strategy.connect as connect
    import ralp.ps_strategy.runtime as runtime_module
    from ralp.cluster.spec import ClusterSpec
    from ralp.training.checkpoints import Position

    clock = Clock()
    clock.wrap(choose, "choose_plan", "profile")
    clock.wrap(connect, "connect", "connect")
    clock.wrap(runtime_module, "placed_clone", "clone")
    clock.wrap(runtime_module.PSRuntime, "_make_optimizers", "optimizers")
    out: dict = {"network": network, "mode": mode, "samples": samples, "image": image,
                 "autograph": autograph,
                 "load_before": os.getloadavg()[0]}
    began = time.perf_counter()
    model = build(network, image, 10)
    out["build_s"] = time.perf_counter() - began
    x, y = data(samples, image, 10)
    began = time.perf_counter()
    trainer = ralp.wrap(model, ClusterSpec.from_dict(json.loads(spec_json)), mode=mode)
    out["wrap_s"] = time.perf_counter() - began
    out["mode_trained"] = trainer.mode
    rt = trainer.runtime
    from ralp.training.fit_inputs import fit_data

    objective = trainer._objective(tf.TensorSpec((None,), tf.int32))
    fit = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=32,
                   steps_per_epoch=None, shuffle=True, model=model, loss=objective.loss)
    sharding = rt.sharding(fit)
    began = time.perf_counter()
    rt.begin(objective, fit, sharding, 0, Position(epoch=0, worker_batches=[0, 0]))
    out["dataset_s"] = time.perf_counter() - began
    coordinator = rt.connection.coordinator
    began = time.perf_counter()
    wait_for_iterators(rt._inputs)
    out["dataset_sent_s"] = time.perf_counter() - began
    from tensorflow.python.distribute.coordinator.cluster_coordinator import _maybe_as_type_spec

    token = tf.constant(0, tf.int64)
    profiler = None
    if profile_trace:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        profile_replica_threads(f"{profile_trace}-{network}-{mode}-replica.prof")
    began = time.perf_counter()
    rt.step.get_concrete_function(_maybe_as_type_spec(rt._inputs), token)
    out["trace_s"] = time.perf_counter() - began
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(f"{profile_trace}-{network}-{mode}.prof")
    began = time.perf_counter()
    first = [coordinator.schedule(rt.step, args=(rt._inputs, tf.constant(k, tf.int64)))
             for k in range(2)]
    coordinator.join()
    out["first_step_s"] = time.perf_counter() - began
    times = []
    for k in range(steps):
        began = time.perf_counter()
        coordinator.schedule(rt.step, args=(rt._inputs, tf.constant(k + 2, tf.int64))).fetch()
        times.append(time.perf_counter() - began)
    out["step_s"] = statistics.median(times) if times else None
    out["steps_s"] = times
    out["loss_first"] = float(first[0].fetch()[0][0])
    out.update({f"{k}_s": v for k, v in clock.seconds.items()})
    out["load_after"] = os.getloadavg()[0]
    return out


def profile_replica_threads(path: str) -> None:
    """cProfile what the replica threads of ``strategy.run`` do (the traced step's body runs
    in one: the coordinator's profile misses it) into ``path``."""
    import cProfile

    from tensorflow.python.distribute import mirrored_run

    cls = mirrored_run._MirroredReplicaThread
    original = cls.run

    def run(self):
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            original(self)
        finally:
            profiler.disable()
            profiler.dump_stats(path)

    cls.run = run


def wait_for_iterators(inputs) -> None:
    """Until every worker's iterator is made (a resource closure: ``join`` does not wait for
    those); the synchronized modes make theirs eagerly, already done."""
    from ralp._compat import remote_value_done

    remotes = getattr(inputs, "_values", ())
    while not all(remote_value_done(r) for r in remotes):
        time.sleep(0.01)


def grappler_seconds(log: str) -> float:
    """A task's grappler time: the sum of its passes' "time = ...ms" lines, in seconds."""
    return sum(float(m) for m in re.findall(r"meta_optimizer.cc:\d+\] .*time = ([0-9.]+)ms", log)) / 1000.0


def measure(network: str, mode: str, args) -> dict:
    from ralp import LocalCluster
    from ralp.cluster.fresh_process import run_in_fresh_process

    env = {"TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "meta_optimizer=1"} if args.vlog \
        else {}
    logs = None if args.logs is None else os.path.join(args.logs, f"{network}-{mode}")
    with LocalCluster(workers=2, ps=1, env=env, log_dir=logs) as cluster:
        spec = json.dumps(cluster.spec.as_dict())
        result = run_in_fresh_process(job, spec, network, mode, args.samples, args.image_size,
                                      args.steps, args.profile_trace, args.autograph,
                                      timeout=args.timeout)
        if args.vlog:
            for w in range(2):
                result[f"worker{w}_grappler_s"] = grappler_seconds(cluster.log_text("worker", w))
            result["ps_grappler_s"] = grappler_seconds(cluster.log_text("ps", 0))
    return result


COLUMNS = ("build", "profile", "connect", "clone", "optimizers", "wrap", "dataset",
           "dataset_sent", "trace", "first_step", "step")


def row(result: dict) -> str:
    cells = [f"{result.get(f'{c}_s') or 0:7.1f}" for c in COLUMNS]
    extra = ""
    if "worker0_grappler_s" in result:
        extra = (f"  grappler w0 {result['worker0_grappler_s']:.1f} w1 "
                 f"{result['worker1_grappler_s']:.1f} ps {result['ps_grappler_s']:.1f}")
    return (f"{result['network']:17} {result['mode']:5} " + " ".join(cells)
            + f"  load {result['load_before']:.1f}/{result['load_after']:.1f}{extra}")


def summarize(paths: list[str]) -> list[str]:
    """Per (network, mode, samples) of the runs in ``paths``: each column's median
    [min-max] over the runs, in seconds, and the runs' load."""
    runs = [r for path in paths for r in json.loads(Path(path).read_text())["runs"]]
    keys = sorted({(r["network"], r["mode"], r["samples"]) for r in runs})
    columns = (*COLUMNS, "worker0_grappler")
    lines = []
    for network, mode, samples in keys:
        group = [r for r in runs if (r["network"], r["mode"], r["samples"]) == (network, mode,
                                                                             samples)]
        cells = []
        for c in columns:
            values = sorted(r[f"{c}_s"] for r in group if r.get(f"{c}_s") is not None)
            if values:
                cells.append(f"{c} {statistics.median(values):.1f} "
                             f"[{values[0]:.1f}-{values[-1]:.1f}]")
        loads = sorted(r["load_before"] for r in group)
        lines.append(f"{network} {mode} {samples} images, {len(group)} runs, load "
                     f"{loads[0]:.1f}-{loads[-1]:.1f}: " + "; ".join(cells))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["efficientnetb0"], choices=NETWORKS)
    parser.add_argument("--modes", nargs="+", default=["ps", "ralp"])
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4, help="steady steps after the first")
    parser.add_argument("--repeat", type=int, default=1, help="rounds, interleaved")
    parser.add_argument("--vlog", action="store_true", help="log the workers' grappler passes")
    parser.add_argument("--profile-trace", metavar="STEM",
                        help="cProfile the coordinator's trace into STEM-NETWORK-MODE.prof")
    parser.add_argument("--no-autograph", dest="autograph", action="store_false",
                        help="trace the steps without AutoGraph")
    parser.add_argument("--logs", help="keep the tasks' logs in this folder")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--out", help="JSON file of every run")
    parser.add_argument("--summarize", nargs="+", metavar="JSON",
                        help="print the medians [min-max] of earlier runs' files; run nothing")
    args = parser.parse_args()
    if args.summarize:
        print("\n".join(summarize(args.summarize)))
        return 0
    if args.vlog:
        os.environ["RALP_START_METHOD"] = "spawn"
    print(f"{'network':17} {'mode':5} " + " ".join(f"{c[:7]:>7}" for c in COLUMNS)
          + "  (seconds)", flush=True)
    results = []
    for _ in range(args.repeat):
        for network in args.models:
            for mode in args.modes:
                result = measure(network, mode, args)
                results.append(result)
                print(row(result), flush=True)
                if args.out:
                    with open(args.out, "w") as f:
                        json.dump({"argv": sys.argv, "runs": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
