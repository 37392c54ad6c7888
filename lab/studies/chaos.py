"""Chaos benchmark: training that survives killed tasks, against a failure-free run.

    python -m lab.studies.chaos --modes ralp ps --workers 3 --steps 300 \\
        --kill worker:1@100 ps:0@200 --checkpoint-every 25 --out chaos.json
    python -m lab.studies.chaos --modes horovod stanza collective  # rank kills, restarts

Per mode, the zoo's lenet (28 px) trains on scikit-learn's digits (75% to train, sharded over
the workers; 25% held out) twice, each on a fresh cluster (netns when available, as the
bench), with the same seed and the same checkpoints (``fit(checkpoint_dir=...,
checkpoint_every=...)``): once undisturbed, once with each ``--kill TASK@STEP`` SIGKILLing
that task when the fit has done STEP steps. The PS modes' cluster restarts a task that exits
(``restart_lost``, as Kubernetes' restart policy would); a lost worker's steps are rerun by the
others, a lost PS is waited for and training goes on from the last checkpoint. The lockstep
modes (horovod, stanza, collective: :mod:`lab.studies.chaos_lockstep`) lose ranks; the
job is started again whole, up to ``--max-restarts`` times, and goes on from its checkpoint.

Reported per mode: steps completed against steps requested, steps redone, test accuracy
against the failure-free run's, wall time of both runs and the time the failures cost (from
detecting each failure until training was back where it had been), and what was left
running afterwards (task processes, network namespaces); for the lockstep modes also the
restarts and the share of a failure-free run's time spent saving checkpoints.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from lab.studies.chaos_lockstep import DEFAULT_KILLS, LOCKSTEP_MODES, ranks_of
from lab.studies.digits_data import (
    IMAGE,
    digits_split,
    saved_or_new,
    sharded_dataset_fn,
    write_results,
)
from ralp._cli import UsageError, positive_int, quiet_tensorflow, words
from ralp.defaults import DEFAULT_BANDWIDTH
from ralp.errors import RalpError

PROG = "python -m lab.studies.chaos"
PS_MODES = ("ralp", "ps")
MODES = (*PS_MODES, *LOCKSTEP_MODES)
PS_KILLS = ("worker:1@100", "ps:0@200")
JOBS = {"ps": ("worker", "ps"), "lockstep": ("rank", "conv", "fc")}
OPTIMIZERS = ("adam", "sgd")  # --optimizer: Keras' Adam or SGD (no momentum)


@dataclass(frozen=True)
class Kill:
    """``job:index@step``: SIGKILL that task once the fit has done ``step`` steps. Tasks:
    ``worker:I``, ``ps:I`` (the PS modes), ``rank:K`` (a lockstep job's rank), and for
    Stanza ``conv:K`` (= rank K) and ``fc:G`` (its G-th FC rank, after the CONV ranks)."""

    job: str
    index: int
    step: int

    @classmethod
    def parse(cls, text: str) -> Kill:
        try:
            task, step = text.split("@")
            job, index = task.split(":")
            kill = cls(job, int(index), int(step))
        except ValueError:
            raise UsageError(f"--kill {text!r}: write TASK@STEP, e.g. worker:1@100, ps:0@200 "
                             "or rank:1@150") from None
        if job not in ("worker", "ps", "rank", "conv", "fc") or kill.index < 0 or kill.step < 1:
            raise UsageError(f"--kill {text!r}: the task is worker:I, ps:I, rank:K, conv:K or "
                             "fc:G, the step >= 1")
        return kill

    def __str__(self) -> str:
        return f"{self.job}:{self.index}@{self.step}"


def chaos_training(spec, mode: str, steps: int, batch: int, optimizer: str,
                   learning_rate: float, schedule: str, seed: int, checkpoint_dir: str,
                   checkpoint_every: int) -> dict:
    """The coordinator's job: train with checkpoints, reporting each finished step to the
    parent (which kills tasks at chosen steps); the counts, the failures, test accuracy."""
    import keras
    import numpy as np

    import ralp
    from ralp.cluster.fresh_process import report_progress
    from ralp.models.digits import to_model_input

    x_train, y_train, x_test, y_test = digits_split(seed)
    dataset_fn = sharded_dataset_fn(x_train, y_train, batch, seed)

    class Progress(keras.callbacks.Callback):
        def on_train_batch_end(self, step, logs=None):
            report_progress(("step", step + 1))

    make_optimizer = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD}[optimizer]
    keras.utils.set_random_seed(seed)
    model = ralp.build_model("lenet", num_classes=10, image_size=IMAGE)
    if schedule == "cosine":  # from the optimizer's (checkpointed) step count
        learning_rate = keras.optimizers.schedules.CosineDecay(learning_rate, steps)
    trainer = ralp.wrap(model, spec, mode=mode, optimizer=make_optimizer(learning_rate),
                        batch_size=batch)
    start = time.perf_counter()
    history = trainer.fit(dataset_fn, steps_per_epoch=steps, batch_size=batch,
                          verbose=0, callbacks=[Progress()], checkpoint_dir=checkpoint_dir,
                          checkpoint_every=checkpoint_every)
    wall = time.perf_counter() - start
    logits = trainer.unwrap().predict(to_model_input(x_test, IMAGE), batch_size=512, verbose=0)
    return {
        "mode": trainer.mode,
        "steps_completed": trainer.runtime.total_steps,
        "steps_redone": history.steps_redone,
        "accuracy": float(np.mean(np.argmax(logits, -1) == y_test)),
        "wall_s": round(wall, 2),
        "time_lost_s": round(history.time_lost_s, 2),
        "failures": [asdict(f) for f in history.failures],
        "duplicate_steps": history.duplicate_steps,
        "iterations": {k: int(o.iterations.numpy()) for k, o in trainer.runtime.optimizers.items()},
    }


class Killer:
    """``on_progress`` of the chaos run: each kill once its step is reached."""

    def __init__(self, cluster, kills: Sequence[Kill]):
        self.cluster, self.pending, self.done = cluster, sorted(kills, key=lambda k: k.step), []

    def __call__(self, message) -> None:
        while self.pending and message[0] == "step" and message[1] >= self.pending[0].step:
            kill = self.pending.pop(0)
            self.cluster.kill_task(kill.job, kill.index)
            self.done.append({"task": f"{kill.job}:{kill.index}", "asked_at_step": kill.step,
                              "killed_at_step": message[1], "at": time.time()})


def left_running(cluster) -> list[str]:
    """What of ``cluster`` (stopped) is still there: task processes, network namespaces."""
    from lab.studies.chaos_lockstep import left_running_pids

    left = left_running_pids(cluster.started_pids)
    namespaces = getattr(cluster, "namespaces", [])
    if namespaces:
        from ralp.emulation.iproute import run_command

        listed = run_command("ip netns list")
        left += [f"netns {ns}" for ns in namespaces if ns in listed.split()]
    return left


def run_mode(run_pair, mode: str, args, kills: list[Kill]) -> dict:
    """``args.repeats`` times ``run_pair(mode, args, kills)``, a failure-free run and a chaos
    run of one mode, each on a fresh cluster; the chaos runs' figures: accuracies and times
    their means, the step counts their worst, what was left running all of it, each pair in
    ``runs``."""
    runs = [run_pair(mode, args, kills) for _ in range(args.repeats)]
    last = runs[-1]["chaos"]
    figures = dict(last)
    figures.update(
        repeats=args.repeats,
        accuracy=_mean(r["chaos"]["accuracy"] for r in runs),
        accuracy_failure_free=_mean(r["failure_free"]["accuracy"] for r in runs),
        wall_s=_mean(r["chaos"]["wall_s"] for r in runs),
        wall_s_failure_free=_mean(r["failure_free"]["wall_s"] for r in runs),
        time_lost_s=_mean(r["chaos"]["time_lost_s"] for r in runs),
        steps_completed=min(r["chaos"]["steps_completed"] for r in runs),
        steps_redone=max(r["chaos"]["steps_redone"] for r in runs),
        left_running=sorted({x for r in runs for x in r["chaos"]["left_running"]
                             + r["failure_free"]["left_running"]}),
        # lockstep modes: the share of a failure-free run's time spent saving checkpoints
        save_overhead=_mean(r["failure_free"]["save_overhead"] for r in runs)
        if "save_overhead" in last else None,
        # and what its saves took (Stanza: each FC copy, and how long a step waited for it)
        **{k: runs[-1]["failure_free"][k] for k in _SAVE_FIGURES if k in last},
        runs=[{kind: {k: r[kind].get(k) for k in _RUN_FIGURES}
               for kind in ("failure_free", "chaos")} for r in runs],
    )
    return figures


_SAVE_FIGURES = ("save_s", "saves", "copy_seconds", "copy_waited_s")
_RUN_FIGURES = ("accuracy", "steps_completed", "steps_redone", "wall_s", "time_lost_s",
                "left_running", "save_overhead", "restarts")


def _mean(values) -> float:
    return round(statistics.fmean(values), 4)


def lockstep_pair(backend: str, bandwidth: str | None):
    """``run_pair`` of a lockstep mode: one failure-free job and one chaos job, each
    restarted whole after a lost rank."""
    from lab.studies.chaos_lockstep import run_lockstep

    def run_pair(mode: str, args, kills: list[Kill]) -> dict:
        return {"failure_free": run_lockstep(mode, args, [], backend, bandwidth),
                "chaos": run_lockstep(mode, args, kills, backend, bandwidth)}

    return run_pair


def _run_pair(launcher_for, mode: str, args, kills: list[Kill]) -> dict:
    """One failure-free run and one chaos run of a PS mode, each on a fresh cluster."""
    from ralp.cluster.fresh_process import run_in_fresh_process

    pair = {}
    for chaos in (False, True):
        with tempfile.TemporaryDirectory(prefix="ralp-chaos-") as directory:
            launcher = launcher_for(chaos)
            with launcher.cluster(args.workers, 1) as handle:
                killer = Killer(handle.cluster, kills) if chaos else None
                out = run_in_fresh_process(
                    chaos_training, handle.spec, mode, args.steps, args.batch_size,
                    args.optimizer, args.learning_rate, args.schedule, args.seed, directory,
                    args.checkpoint_every, netns=handle.netns, on_progress=killer,
                    timeout=3600, env={"CUDA_VISIBLE_DEVICES": "-1"},
                )
                cluster = handle.cluster
            out["left_running"] = left_running(cluster)
        if chaos:
            out["kills"] = killer.done
        pair["chaos" if chaos else "failure_free"] = out
    return pair


def table(results: list[dict]) -> str:
    from ralp._text import text_grid

    header = ["mode", "steps done/asked", "redone", "accuracy", "failure-free", "wall s",
              "failure-free s", "time lost s", "restarts", "saving", "left running"]
    rows = []
    for r in results:
        if r.get("error"):
            rows.append([r["mode"], *["-"] * 9, f"error: {r['error']}"])
            continue
        saving = r.get("save_overhead")
        rows.append([r["mode"], f"{r['steps_completed']}/{r['steps_requested']}",
                     str(r["steps_redone"]), f"{r['accuracy']:.3f}",
                     f"{r['accuracy_failure_free']:.3f}", f"{r['wall_s']:.1f}",
                     f"{r['wall_s_failure_free']:.1f}", f"{r['time_lost_s']:.1f}",
                     "-" if r.get("restarts") is None else str(r["restarts"]),
                     "-" if saving is None else f"{100 * saving:.1f}%",
                     ", ".join(r["left_running"]) or "nothing"])
    return "\n".join(text_grid(header, rows))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Training through killed tasks (a worker, "
                                "the PS) against a failure-free run, on the digits.")
    p.add_argument("--modes", nargs="+", default=list(PS_MODES), metavar="MODE",
                   help=f"{', '.join(MODES)} (default: ralp ps), by spaces or commas")
    p.add_argument("--workers", type=positive_int, default=3)
    p.add_argument("--steps", type=positive_int, default=300, help="steps in all (all workers)")
    p.add_argument("--kill", nargs="+", default=None, metavar="TASK@STEP",
                   help="SIGKILL TASK once STEP steps are done (default: worker:1@100 ps:0@200 "
                        "for ralp and ps, rank:1@150 for horovod and collective, fc:0@100 "
                        "conv:1@200 for stanza)")
    p.add_argument("--checkpoint-every", type=positive_int, default=25, help="steps")
    p.add_argument("--max-restarts", type=int, default=3,
                   help="lockstep modes: times the whole job is started again after a lost "
                        "rank (default 3)")
    p.add_argument("--batch-size", type=positive_int, default=32)
    # The final accuracy of asynchronous training moves with the order of its updates, which
    # a failure changes. Measured, same seed, failure-free: plain SGD 0.05 is still climbing
    # at 300 steps (0.936-0.962); SGD with momentum 0.9 diverged (0.10); Adam at a constant
    # 1e-3 ends anywhere in 0.962-0.987. Adam whose rate decays to 0 over the run (cosine)
    # ends within a point (0.976-0.984, three runs), so the comparison measures the failures.
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                   help="the learning rate over the steps (default: cosine decay to 0)")
    p.add_argument("--backend", choices=("auto", "local", "netns"), default="auto")
    p.add_argument("--bandwidth", default=None, help=f"netns link rate (default {DEFAULT_BANDWIDTH})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=positive_int, default=1,
                   help="failure-free and chaos runs per mode; accuracies are their means "
                        "(async training's final accuracy varies run to run)")
    p.add_argument("--out", metavar="JSON")
    p.add_argument("--show", metavar="JSON", help="run nothing: the table of saved results")
    return p


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    results = saved_or_new(PROG, args, _run)
    if isinstance(results, int):
        return results
    print(table(results))
    return 1 if any(r.get("error") for r in results) else 0


def _run(args) -> list[dict]:
    from lab.studies.result_schemas import make_chaos_result
    from ralp.bench.config import BenchRequest
    from ralp.bench.launcher import Launcher
    from ralp.bench.records import short_error
    from ralp.cluster.fresh_process import ChildError
    from ralp.cluster.spec import ClusterError

    modes = words(args.modes)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise UsageError(f"unknown mode(s) {unknown}; choose from {', '.join(MODES)}")
    kills = {mode: _kills(mode, args) for mode in modes}
    _check_horovod(modes)
    quiet_tensorflow()
    request = BenchRequest(backend=args.backend, bandwidth=args.bandwidth)
    backend, _ = request.backend_choice()
    bandwidth = request.link_bandwidth(backend)
    Launcher(backend, bandwidth=bandwidth).check()
    results = []
    for mode in modes:
        lockstep = mode in LOCKSTEP_MODES
        where = {"model": "lenet", "workers": ranks_of(mode, args.workers) if lockstep
                 else args.workers, "ps": 0 if lockstep else 1, "backend": backend,
                 "bandwidth": bandwidth, "batch_size": args.batch_size, "optimizer": args.optimizer,
                 "learning_rate": args.learning_rate, "schedule": args.schedule,
                 "seed": args.seed, "repeats": args.repeats,
                 "steps_requested": args.steps, "checkpoint_every": args.checkpoint_every}
        print(f"{PROG}: {mode}: a failure-free run, then one killing "
              f"{' '.join(map(str, kills[mode]))}", file=sys.stderr)
        pair = lockstep_pair(backend, bandwidth) if lockstep else (
            lambda m, a, k: _run_pair(lambda chaos: Launcher(backend, bandwidth=bandwidth,
                                                             restart_lost=chaos), m, a, k))
        try:
            figures = run_mode(pair, mode, args, kills[mode])
        except (ChildError, ClusterError, RalpError) as e:
            results.append(make_chaos_result(mode, where, error=short_error(e)))
            continue
        figures.pop("resumed_from_step", None)
        results.append(make_chaos_result(figures.pop("mode"), where, figures))
    write_results(args, results)
    return results


def _kills(mode: str, args) -> list[Kill]:
    """The mode's kills: ``--kill``'s, else the mode's default; each checked against the
    mode's tasks."""
    lockstep = mode in LOCKSTEP_MODES
    given = words(args.kill) if args.kill else (DEFAULT_KILLS[mode] if lockstep else PS_KILLS)
    kills = [Kill.parse(k) for k in given]
    ranks = ranks_of(mode, args.workers)
    for kill in kills:
        if kill.job not in JOBS["lockstep" if lockstep else "ps"]:
            raise UsageError(f"--kill {kill}: mode {mode} has " + (
                "ranks (rank:K; Stanza also conv:K, fc:G)" if lockstep else "workers and a PS"))
        if kill.job in ("conv", "fc") and mode != "stanza":
            raise UsageError(f"--kill {kill}: only Stanza has CONV and FC ranks")
        if kill.job == "worker" and kill.index >= args.workers:
            raise UsageError(f"--kill {kill}: there are only {args.workers} workers")
        if kill.job == "ps" and kill.index != 0:
            raise UsageError(f"--kill {kill}: the chaos cluster has one PS, ps:0")
        limit = {"rank": ranks, "conv": args.workers, "fc": 1}.get(kill.job)
        if limit is not None and kill.index >= limit:
            raise UsageError(f"--kill {kill}: mode {mode} has {limit} such rank(s)")
        if kill.step >= args.steps:
            raise UsageError(f"--kill {kill}: the run has only {args.steps} steps")
    return kills


def _check_horovod(modes: list[str]) -> None:
    from ralp.horovod.launch import horovod_unavailable_reason

    needing = [m for m in modes if m in ("horovod", "stanza")]
    reason = horovod_unavailable_reason() if needing else None
    if reason:
        raise UsageError(f"modes {', '.join(needing)} need Horovod: {reason}")


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
