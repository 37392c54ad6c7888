"""Do an allreduce mode's reductions run while its backward pass does? A real step's timeline.

Runs one bench setting in mode horovod, stanza or collective on the simulated cluster of
budgeted devices (netns, shaped links), as ``python -m ralp.bench`` runs it, with every rank
under ``tf.profiler`` from its start to its end (warm-up and measured steps). Each rank's
trace goes to ``TRACES/rank<r>/``. Then, per rank and step (:mod:`ralp.audit.overlap`): the
backward pass's end, when the first gradient's reduction started and when the first was done,
and how long the reductions ran on after the backward pass. In modes horovod and stanza,
Horovod's own timeline (``HOROVOD_TIMELINE``, rank 0's process sets: every gradient in
horovod, the CONV ranks' ring in stanza), laid on the ranks' clock, says besides when the
first allreduce of each step went on the wire against each rank's backward pass.

    python lab/tools/reduction_timeline.py run --model alexnet --mode horovod --devices 4 \\
        --bandwidth 1gbit --traces /tmp/traces/alexnet_horovod
    python lab/tools/reduction_timeline.py analyse /tmp/traces/alexnet_horovod --out FILE.json

The ranks run ``python -m lab.tools.reduction_timeline rank ...`` (forked as the bench's
ranks are). ``run --commit C`` traces another commit: its files (``git archive``) in a
temporary folder with this module copied in, run from there. ``analyse`` needs this
checkout's ralp. The traces (a few MB per rank) stay where ``--traces`` puts them.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

TRACES_ENV = "RALP_LAB_TRACES"  # a rank writes its trace under $RALP_LAB_TRACES/rank<r>/
HOROVOD_TIMELINE = "horovod_timeline.json"  # beside the ranks' traces (horovod, stanza)


def _rank() -> int:
    if "HOROVOD_RANK" in os.environ:
        return int(os.environ["HOROVOD_RANK"])
    return int(json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index", 0))


def _traced(job):
    """``job`` (a bench rank job) under ``tf.profiler``, its trace under ``$TRACES_ENV``."""

    def traced(run, read_links, started, read_cpu):
        if run.mode == "collective":
            from ralp.collective.runtime import make_strategy

            make_strategy(timeout_s=None)  # before any other TensorFlow work
        import tensorflow as tf

        tf.profiler.experimental.start(os.path.join(os.environ[TRACES_ENV], f"rank{_rank()}"))
        try:
            return job(run, read_links, started, read_cpu)
        finally:
            tf.profiler.experimental.stop()

    return traced


def rank_job(argv: list[str]) -> int:
    """One rank of the traced job: the bench's own rank job, under the profiler."""
    spec = json.loads(argv[argv.index("--spec") + 1])
    from ralp.bench.rank_job import rank_main

    if spec["mode"] == "collective":
        from ralp._compat import exit_without_teardown
        from ralp.bench.collective_job import collective_bench_job

        code = rank_main("reduction_timeline rank", _traced(collective_bench_job), argv)
        if code:
            return code
        exit_without_teardown()
    from ralp.bench import horovod_job
    from ralp.emulation.devices import join_rank_group

    code = rank_main("reduction_timeline rank", _traced(horovod_job.horovod_bench_job), argv,
                     before=join_rank_group)
    if code:
        return code
    horovod_job._exit_together()
    return 0


def run(args) -> dict:
    """The setting on a fresh simulated cluster, every rank traced; rank 0's record."""
    import time

    from ralp.bench.launcher import Launcher
    from ralp.bench.rank_job import rank_command
    from ralp.bench.runspec import RunSpec
    from ralp.collective.launch import launch as collective_launch
    from ralp.horovod.launch import launch

    run_spec = RunSpec.for_devices(args.model, args.mode, args.devices, args.fc_workers,
                                   image_size=args.image_size, batch_size=args.batch_size,
                                   steps=args.steps, warmup=args.warmup)
    launcher = Launcher("netns", bandwidth=args.bandwidth)
    launcher.check([args.mode])
    budget = launcher.budget(run_spec.device_cpus, run_spec.devices)
    os.makedirs(args.traces, exist_ok=True)
    env = {TRACES_ENV: os.path.abspath(args.traces)}
    if args.mode != "collective":  # Horovod's own timeline too (rank 0 writes it)
        env["HOROVOD_TIMELINE"] = os.path.abspath(os.path.join(args.traces, HOROVOD_TIMELINE))
    started = time.time()

    def command(links, cpu) -> list[str]:  # the bench's rank command, run by this module
        bench = rank_command("ralp.bench.horovod_job", run_spec, links, started, cpu)
        return [sys.executable, "-m", "lab.tools.reduction_timeline", "rank", *bench[3:]]

    if args.mode == "collective":
        return collective_launch(command, run_spec.workers, "netns", bandwidth=args.bandwidth,
                                 budget=budget, timeout=args.timeout, env=env)
    return launch(command, run_spec.workers, "netns", bandwidth=args.bandwidth,
                  fc_ranks=run_spec.ps, budget=budget, timeout=args.timeout, env=env)


def run_commit(args, argv: list[str]) -> int:
    """``run`` (``argv``, without ``--commit``) on ``args.commit``'s files."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="ralp-reduction-timeline-") as tree:
        archive = subprocess.run(["git", "-C", str(root), "archive", args.commit], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        shutil.copy(__file__, os.path.join(tree, "lab", "tools", os.path.basename(__file__)))
        traces = os.path.abspath(args.traces)
        command = [sys.executable, "-m", "lab.tools.reduction_timeline", *argv,
                   "--traces", traces]
        return subprocess.run(command, cwd=tree, env={**os.environ, "PYTHONPATH": tree}).returncode


def analyse(traces: str, skip: int) -> dict:
    """Per rank: every step's figures and their medians (the first ``skip`` steps left out:
    tracing and warm-up); with Horovod's timeline, when the first gradient allreduce of each
    step went on the wire against the rank's backward pass (``wire_lead_s``)."""
    import statistics

    from lab.tools.stanza_phases import read_events
    from ralp._compat import read_xspace_events, xspace_start_time
    from ralp.audit.overlap import median_figures, ring_spans, step_overlaps, wire_lead

    timeline = os.path.join(traces, HOROVOD_TIMELINE)
    spans = ring_spans(read_events(timeline)) if os.path.exists(timeline) else None
    ranks = {}
    for folder in sorted(glob.glob(os.path.join(traces, "rank*"))):
        files = sorted(glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True))
        if not files:
            continue
        steps = step_overlaps(read_xspace_events(files[-1]), xspace_start_time(files[-1]))
        steps = steps[skip:]
        rows = [s.figures() for s in steps]
        median = median_figures(steps)
        if spans is not None:
            for row, step in zip(rows, steps, strict=True):
                row["wire_lead_s"] = wire_lead(step, spans)
            leads = [r["wire_lead_s"] for r in rows if r["wire_lead_s"] is not None]
            median["wire_lead_s"] = statistics.median(leads) if leads else None
        ranks[os.path.basename(folder)] = {"median": median, "steps": rows}
    return {"ranks": ranks}


def table(name: str, found: dict) -> str:
    lines = [f"{name}: per rank, medians over its steps (ms from the step's start; tf.profiler)",
             "  rank     steps  step  backward_end  first_start  lead  wire_lead  "
             "first_done_lead  exposed  done_in_backward/reductions"]
    for rank, r in found["ranks"].items():
        m = r["median"]
        if not m["steps"]:
            lines.append(f"  {rank:7s} no step with gradient reductions")
            continue
        wire = m.get("wire_lead_s")
        lines.append(
            f"  {rank:7s} {m['steps']:5d} {1e3 * m['step_s']:5.0f} {1e3 * m['backward_end_s']:13.0f}"
            f" {1e3 * m['first_start_s']:12.0f} {1e3 * m['lead_s']:5.0f}"
            f" {'-' if wire is None else f'{1e3 * wire:.0f}':>10s}"
            f" {1e3 * m['done_lead_s']:16.0f} {1e3 * m['exposed_s']:8.0f}"
            f"  {m['done_in_backward']:g}/{m['reductions']}")
    lines.append("  (lead: the first gradient reduction handed over before the backward pass "
                 "ended; wire_lead: the first gradient allreduce on the wire before it, from "
                 "Horovod's timeline: rank 0's process sets)")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        return rank_job(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run and trace one setting")
    r.add_argument("--model", required=True)
    r.add_argument("--mode", choices=("horovod", "stanza", "collective"), required=True)
    r.add_argument("--devices", type=int, default=4)
    r.add_argument("--fc-workers", type=int, default=1, help="stanza: its FC ranks")
    r.add_argument("--bandwidth", default="1gbit")
    r.add_argument("--image-size", type=int, default=75)
    r.add_argument("--batch-size", type=int, default=8)
    r.add_argument("--steps", type=int, default=8)
    r.add_argument("--warmup", type=int, default=2)
    r.add_argument("--timeout", type=float, default=1800.0)
    r.add_argument("--traces", required=True, help="the folder the ranks' traces go to")
    r.add_argument("--commit", help="trace this commit's ralp, not this checkout's")
    a = sub.add_parser("analyse", help="the step timelines of a run's traces")
    a.add_argument("traces")
    a.add_argument("--skip", type=int, default=2, help="steps left out first (default 2)")
    a.add_argument("--name", help="the setting's name in the printout")
    a.add_argument("--out", help="write every rank's steps and medians here (JSON)")
    args = p.parse_args()
    if args.command == "run" and args.commit:
        argv = sys.argv[1:]
        at = argv.index("--commit")
        del argv[at:at + 2]
        at = argv.index("--traces")
        del argv[at:at + 2]
        return run_commit(args, argv)
    if args.command == "run":
        record = run(args)
        print(json.dumps({k: record.get(k) for k in ("model", "mode", "devices", "workers",
                                                     "ps", "images_per_sec", "error")}))
        return 0
    ranks = analyse(args.traces, args.skip)
    print(table(args.name or args.traces, ranks))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(ranks, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
