"""Synchronization paradigms on real data: test accuracy against wall time, one slow worker.

    python -m lab.studies.sync_digits --syncs bsp asp ssp:3 ssp:9 ssp:15 dssp:3:15 \\
        --workers 4 --slow-worker 0:2 --steps 480 --target 0.9 --out sync.json --plot sync.png

Each paradigm trains the zoo's lenet (28 px) on scikit-learn's handwritten digits (75% to
train, sharded over the workers; 25% held out) on a fresh cluster (netns when available, as
the bench). While it trains, a thread in the coordinator reads the weights every
``--eval-every`` seconds; each snapshot's test accuracy is computed after training, so
evaluation takes no training time. Reported per paradigm: accuracy against wall time (plot),
time to reach ``--target`` accuracy, iterations per second, waiting time, largest clock gap.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from lab.studies.digits_data import (
    median_time_to,
    saved_or_new,
    sync_curve,
    write_results,
)
from ralp._cli import positive_int, quiet_tensorflow
from ralp.defaults import DEFAULT_BANDWIDTH, DEFAULT_BATCH_SIZE

PROG = "python -m lab.studies.sync_digits"
DEFAULT_SYNCS = ("bsp", "asp", "ssp:3", "ssp:9", "ssp:15", "dssp:3:15")


def _by_sync(results: list[dict]) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    for r in results:
        runs.setdefault(r["sync"], []).append(r)
    return runs


def table(results: list[dict], targets: Sequence[float]) -> str:
    """One row per paradigm: medians over its seeds (one seed: that run's figures)."""
    from ralp._text import text_grid

    header = ["sync", "seeds", "it/s", *(f"t to {t:.0%} (s)" for t in targets), "final acc",
              "wall s", "wait s", "max gap", "slow delay s", "steps per worker"]
    rows = []
    for sync, runs in _by_sync(results).items():
        done = [r for r in runs if not r.get("error")]
        if not done:
            rows.append([sync, str(len(runs)), *["-"] * (len(header) - 3),
                         f"error: {runs[0]['error']}"])
            continue

        def med(key, done=done):
            return statistics.median(r[key] for r in done if r.get(key) is not None)

        reached = [median_time_to(done, t) for t in targets]
        rows.append([sync, str(len(done)), f"{med('iterations_per_s'):.1f}",
                     *("never" if t is None else f"{t:.1f}" for t in reached),
                     f"{med('final_accuracy'):.3f}", f"{med('wall_s'):.1f}",
                     "-" if done[0].get("total_waiting_s") is None
                     else f"{med('total_waiting_s'):.1f}",
                     str(max(r.get("max_gap") or 0 for r in done)),
                     "-" if done[0].get("slow_delay_s") is None else f"{med('slow_delay_s'):.3f}",
                     " ".join(map(str, done[0].get("steps_per_worker") or []))])
    note = " (medians over seeds; max gap: the largest of any seed)" if any(
        len(r) > 1 for r in _by_sync(results).values()) else ""
    return "\n".join(text_grid(header, rows)) + ("\n" + note.strip() if note else "")


def plot(results: list[dict], targets: Sequence[float], path: str, title: str) -> None:
    """Left: accuracy against wall time (the first seed of each paradigm); right: the median
    time to each target per paradigm (missing bar: fewer than half the seeds got there)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.4), layout="constrained")
    ax_t, ax_b = fig.subplots(1, 2)
    runs = _by_sync(results)
    for sync, group in runs.items():
        done = [r for r in group if not r.get("error")]
        if not done:
            continue
        curve = done[0]["curve"]
        style = "--" if sync.startswith("dssp") else "-"
        ax_t.plot([p["time_s"] for p in curve], [p["accuracy"] for p in curve], style,
                  marker=".", label=sync)
    for t in targets:
        ax_t.axhline(t, color="grey", lw=0.8, ls=":")
    ax_t.set(xlabel="wall time (s)", ylabel="test accuracy", ylim=(0, 1))
    ax_t.grid(alpha=0.3)
    ax_t.legend(loc="lower right", fontsize=8)
    width = 0.8 / max(1, len(targets))
    names = list(runs)
    for k, t in enumerate(targets):
        values = [median_time_to([r for r in runs[n] if not r.get("error")], t) for n in names]
        xs = [i + (k - (len(targets) - 1) / 2) * width for i in range(len(names))]
        bars = ax_b.bar(xs, [v or 0 for v in values], width, label=f"to {t:.0%}")
        ax_b.bar_label(bars, labels=["never" if v is None else f"{v:.0f}" for v in values],
                       fontsize=7)
    ax_b.set_xticks(range(len(names)), names, fontsize=8, rotation=20)
    ax_b.set_ylabel("seconds (median over seeds)")
    ax_b.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Accuracy against wall time of the "
                                "synchronization paradigms on the digits, one worker slowed.")
    p.add_argument("--syncs", nargs="+", default=list(DEFAULT_SYNCS), metavar="SYNC",
                   help=f"paradigms (default: {' '.join(DEFAULT_SYNCS)})")
    p.add_argument("--workers", type=positive_int, default=4)
    p.add_argument("--slow-worker", default="0:2", metavar="INDEX:FACTOR",
                   help="heterogeneity (default 0:2: worker 0 takes twice as long; "
                   "INDEX:+SECONDS for a fixed delay after each of its steps)")
    p.add_argument("--mode", choices=("ps", "ralp"), default="ps")
    p.add_argument("--steps", type=positive_int, default=480, help="steps in all (all workers)")
    p.add_argument("--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE)
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--eval-every", type=float, default=2.0, help="seconds between snapshots")
    p.add_argument("--target", type=float, nargs="+", default=[0.9],
                   help="target test accuracies (default 0.9)")
    p.add_argument("--backend", choices=("auto", "local", "netns"), default="auto")
    p.add_argument("--bandwidth", default=None,
                   help=f"netns link rate (default {DEFAULT_BANDWIDTH})")
    p.add_argument("--seeds", type=int, nargs="+", default=[0],
                   help="each paradigm runs once per seed; the table shows medians")
    p.add_argument("--out", metavar="JSON")
    p.add_argument("--plot", metavar="PNG")
    p.add_argument(
        "--show", metavar="JSON", help="run nothing: table (and --plot) of saved results"
    )
    return p


def plot_title(results: list[dict]) -> str:
    """From the results themselves, so that --show titles saved runs right."""
    from ralp.ps_strategy.sync import SlowWorker

    done = [r for r in results if not r.get("error")]
    if not done:
        return "lenet on digits"
    workers = len(done[0].get("steps_per_worker") or [])
    slow = done[0].get("slow_worker")
    return (f"lenet on digits, {workers} workers, "
            + (SlowWorker.parse(slow).describe() if slow else "no slow worker"))


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    results = saved_or_new(PROG, args, _run)
    if isinstance(results, int):
        return results
    print(table(results, args.target))
    if args.plot:
        plot(results, args.target, args.plot, plot_title(results))
        print(f"wrote {args.plot}")
    return 1 if any(r.get("error") for r in results) else 0


def _run(args) -> list[dict]:
    from tqdm import tqdm

    from lab.studies.result_schemas import make_sync_result
    from ralp.bench.config import BenchRequest
    from ralp.bench.launcher import Launcher
    from ralp.bench.records import short_error
    from ralp.cluster.fresh_process import ChildError, run_in_fresh_process
    from ralp.cluster.spec import ClusterError
    from ralp.ps_strategy.staleness import SyncPolicy
    from ralp.ps_strategy.sync import SlowWorker, check_slow_worker

    quiet_tensorflow()
    for s in args.syncs:
        SyncPolicy.parse(s)  # bad names fail before any cluster starts
    if args.slow_worker:
        check_slow_worker(SlowWorker.parse(args.slow_worker), args.workers)
    request = BenchRequest(backend=args.backend, bandwidth=args.bandwidth)
    backend, _ = request.backend_choice()
    bandwidth = request.link_bandwidth(backend)
    launcher = Launcher(backend, bandwidth=bandwidth)
    launcher.check()
    results = []
    plan = [(seed, sync) for seed in args.seeds for sync in args.syncs]
    for seed, sync in tqdm(plan, unit="run", desc="paradigms x seeds"):
        where = {"backend": backend, "bandwidth": bandwidth, "workers": args.workers,
                 "seed": seed}
        try:
            with launcher.cluster(args.workers, 1) as handle:
                figures = run_in_fresh_process(
                    sync_curve, handle.spec, sync, args.slow_worker, args.mode, args.steps,
                    args.batch_size, args.learning_rate, args.eval_every, seed,
                    handle.read_links, netns=handle.netns, timeout=3600,
                    env={"CUDA_VISIBLE_DEVICES": "-1"},
                )
        except (ChildError, ClusterError) as e:
            results.append(make_sync_result(sync, where, error=short_error(e)))
            continue
        results.append(make_sync_result(figures.pop("sync"), where, figures))
    write_results(args, results)
    return results


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
