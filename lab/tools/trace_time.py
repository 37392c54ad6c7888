"""How long an allreduce mode's step takes to trace: the step function's tracing (Python,
AutoGraph, the graph's construction) and its first call (the graph's optimization and
instantiation, and one step) beside a later call, on each rank of a real job.

    python lab/tools/trace_time.py --model googlenet --mode horovod [--out FILE]
    python lab/tools/trace_time.py --commits BEFORE AFTER --rounds 2 --models googlenet \
        inception3 --modes horovod stanza collective --out FILE

Mode horovod runs one rank (its graph is every rank's; the allreduce ops are in it for any
number of ranks), collective two workers (one worker's all-reduce is the identity) and stanza
three ranks (two CONV ranks, so the CONV ring is traced, and one FC rank). Run as a file, so
that ``PYTHONPATH`` picks the ralp it measures (a worktree of another commit: the same tool
measures before and after). Every rank reports; the output is one JSON line per rank. With
``--commits``, each commit's files (``git archive``) in a temporary folder, every setting run
on each in turn, round after round (interleaved: the host's load drifts).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RANKS = {"horovod": 1, "collective": 2, "stanza": 3}


def _timed(function, seen: dict):
    """``function`` (a tf.function), timing its tracing apart from its first call."""

    def call(*args, **kwargs):
        start = time.perf_counter()
        if "trace_s" not in seen:
            function.get_concrete_function(*args, **kwargs)
            seen["trace_s"] = time.perf_counter() - start
            start = time.perf_counter()
        out = function(*args, **kwargs)
        seen.setdefault("calls_s", []).append(time.perf_counter() - start)
        return out

    return call


def _wrap_step(callable_, seen: dict, depth: int = 0) -> bool:
    """Put :func:`_timed` in place of the step's tf.function wherever the runtime's
    ``_train`` closes over it (directly, or through stanza's lambda)."""
    import tensorflow as tf

    for cell in getattr(callable_, "__closure__", None) or ():
        value = cell.cell_contents
        if isinstance(value, tf.types.experimental.PolymorphicFunction):
            cell.cell_contents = _timed(value, seen)
            return True
        if callable(value) and depth < 2 and _wrap_step(value, seen, depth + 1):
            return True
    return False


def rank_job(args) -> None:
    import keras
    import numpy as np

    if args.mode == "collective":
        from ralp.collective.runtime import make_strategy

        make_strategy()  # before any other TensorFlow work
    import ralp
    from ralp.models import build_model

    def build():
        keras.utils.set_random_seed(0)
        return build_model(args.model, num_classes=1000, image_size=args.image_size)

    model = build if args.mode == "collective" else build()
    extra = {"fc_workers": 1} if args.mode == "stanza" else {}
    trainer = ralp.wrap(model, mode=args.mode, optimizer=keras.optimizers.SGD(1e-3), **extra)
    runtime = trainer.runtime
    batch = args.batch_size * runtime.data_workers
    seen: dict = {}
    build_step = runtime._build

    def timed_build(objective, data):
        build_step(objective, data)
        if not _wrap_step(runtime._train, seen):
            raise RuntimeError("found no tf.function in the runtime's step")

    runtime._build = timed_build
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch * 3, args.image_size, args.image_size, 3)).astype("float32")
    y = rng.integers(0, 1000, batch * 3)
    trainer.fit(x, y, batch_size=batch, epochs=1, verbose=0)
    calls = seen["calls_s"]
    result = {"model": args.model, "mode": args.mode, "rank": runtime.rank,
              "trace_s": round(seen["trace_s"], 3), "first_call_s": round(calls[0], 3),
              "later_call_s": round(statistics.median(calls[1:]), 3)}
    with open(os.path.join(args.rank_job, f"rank{runtime.rank}.json"), "w") as f:
        json.dump(result, f)
    runtime.barrier()
    if args.mode == "collective":
        runtime.leave_together()
    elif runtime.rank == 0:
        from ralp._messages import emit

        emit("record", {"ranks": runtime.size})


def launch(args) -> list[dict]:
    command = [sys.executable, os.path.abspath(__file__), "--model", args.model, "--mode",
               args.mode, "--image-size", str(args.image_size), "--batch-size",
               str(args.batch_size)]
    with tempfile.TemporaryDirectory(prefix="ralp-trace-time-") as out:
        command += ["--rank-job", out]
        ranks = RANKS[args.mode]
        if args.mode == "collective":
            from ralp.collective.launch import run_workers

            run_workers(command, ranks, timeout=args.timeout)
        else:
            from ralp.horovod.launch import horovodrun_command, run_and_collect

            run_and_collect(horovodrun_command(ranks, command), None, args.timeout)
        results = []
        for rank in range(ranks):
            with open(os.path.join(out, f"rank{rank}.json")) as f:
                results.append(json.load(f))
    return results


def interleaved(args) -> None:
    """Every setting on each commit in turn, ``args.rounds`` times; each run's lines (with its
    commit and round) appended to ``args.out``."""
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="ralp-trace-time-ab-") as work:
        trees = {}
        for commit in args.commits:
            trees[commit] = os.path.join(work, commit)
            os.makedirs(trees[commit])
            archive = subprocess.run(["git", "-C", str(root), "archive", commit],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", trees[commit]], input=archive, check=True)
        for round_index in range(args.rounds):
            for model in args.models:
                for mode in args.modes:
                    for commit, tree in trees.items():
                        command = [sys.executable, os.path.abspath(__file__), "--model", model,
                                   "--mode", mode, "--image-size", str(args.image_size),
                                   "--batch-size", str(args.batch_size)]
                        done = subprocess.run(command, env={**os.environ, "PYTHONPATH": tree},
                                              cwd=tree, check=True, capture_output=True,
                                              text=True, timeout=args.timeout)
                        lines = [{**json.loads(line), "commit": commit, "round": round_index}
                                 for line in done.stdout.splitlines() if line.startswith("{")]
                        with open(args.out, "a") as f:
                            f.writelines(json.dumps(line) + "\n" for line in lines)
                        print(f"{model} {mode} {commit} round {round_index + 1}: trace "
                              f"{[line['trace_s'] for line in lines]} s", flush=True)


def summary(path: str) -> str:
    """Per model, mode and commit: the median over ranks and rounds of the tracing and of the
    first call's time beyond a later call's, in seconds."""
    rows: dict[tuple, list[dict]] = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            rows.setdefault((r["model"], r["mode"], r["commit"]), []).append(r)
    out = ["model       mode        commit    runs  trace_s  first_call_extra_s  step_s"]
    for (model, mode, commit), runs in rows.items():
        trace = statistics.median(r["trace_s"] for r in runs)
        extra = statistics.median(r["first_call_s"] - r["later_call_s"] for r in runs)
        step = statistics.median(r["later_call_s"] for r in runs)
        out.append(f"{model:11s} {mode:11s} {commit:9s} {len(runs):4d}  {trace:7.2f}  "
                   f"{extra:18.2f}  {step:6.2f}")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model")
    p.add_argument("--mode", choices=tuple(RANKS))
    p.add_argument("--commits", nargs=2, metavar=("BEFORE", "AFTER"))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--models", nargs="+", default=["googlenet", "inception3"])
    p.add_argument("--modes", nargs="+", choices=tuple(RANKS), default=list(RANKS))
    p.add_argument("--image-size", type=int, default=75)
    p.add_argument("--batch-size", type=int, default=8, help="per rank that reads data")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--rank-job", help=argparse.SUPPRESS)  # a rank: write its result here
    p.add_argument("--out", help="append the ranks' JSON lines to this file")
    p.add_argument("--summary", metavar="FILE", help="sum up a file of --commits' lines")
    args = p.parse_args()
    if args.rank_job:
        rank_job(args)
        return 0
    if args.summary:
        print(summary(args.summary))
        return 0
    if args.commits:
        if not args.out:
            p.error("--commits needs --out")
        interleaved(args)
        return 0
    if not (args.model and args.mode):
        p.error("name --model and --mode (or --commits)")
    lines = [json.dumps(r) for r in launch(args)]
    print("\n".join(lines))
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
