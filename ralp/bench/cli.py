"""``python -m ralp.bench``: plain PS vs RALP, measured on a real or simulated cluster.

With no arguments it runs a small comparison that shows the effect on a 2-core machine in a
few minutes: scaled alexnet (FC-heavy) and googlenet (its parameters in convolutions), plain PS,
RALP-N, Horovod and Stanza on 4 devices, on shaped simulated links (the netns backend) when
this machine allows it, on loopback otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ralp import modes as registry
from ralp._cli import (
    UsageError,
    fail,
    interrupt_on_sigterm,
    positive_int,
    quiet_tensorflow,
    words,
)
from ralp.bench.config import AUTO, DEFAULT_COMPARISON, NO_PS_MODES, SCENARIOS, BenchRequest
from ralp.bench.runspec import (
    BACKENDS,
    DATA,
    DEFAULT_STEPS,
    DEFAULT_WARMUP,
    MODES,
)
from ralp.defaults import DEFAULT_BANDWIDTH
from ralp.errors import RalpError

PROG = "python -m ralp.bench"
_D = DEFAULT_COMPARISON


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Benchmark plain parameter-server training against RALP layer placement "
        "(and the modes' resource configurations) on a cluster: images/s, step time, and "
        "bytes per step measured on each link and predicted by the profiler.",
        epilog="Without arguments: a small default comparison (scaled alexnet and googlenet, "
        "ps vs ralp-n vs horovod vs stanza, N=4, netns at 1gbit when run as root, else "
        "local).",
    )
    _add_workload_args(p)
    _add_cluster_args(p)
    _add_training_args(p)
    _add_measuring_args(p)
    return p


def _add_workload_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to run")
    which = g.add_mutually_exclusive_group()
    which.add_argument("--models", nargs="+", metavar="MODEL",
                       help="zoo models, by spaces or commas (default: "
                       f"{' '.join(_D.models)})")
    which.add_argument("--keras-model", metavar="FILE", help="your own model, saved with "
                       "model.save('FILE.keras'): measured on synthetic data of its input "
                       "shape and classes")
    g.add_argument("--modes", nargs="+", metavar="MODE",
                   help=f"from {', '.join(MODES)}, by spaces or commas (default: "
                   f"{' '.join(_D.modes)}); or auto alone: the planner's choice per model "
                   "and N (netns backend)")
    g.add_argument("--compute-profile", metavar="FILE", help="--modes auto: the planner's "
                   "calibration (python -m ralp.planner --calibrate); default: measured here "
                   "first")
    g.add_argument("--batch-size", type=positive_int, help="per-worker batch (default: the "
                   "model's benchmark default)")
    g.add_argument("--num-classes", type=positive_int,
                   help="1000 (ImageNet-1K, default) or 21841 (ImageNet-22K); 10 with --data "
                   "digits")
    g.add_argument("--data", choices=DATA, default="synthetic",
                   help="synthetic batches (default) or the real scikit-learn digits, resized "
                   "to --image-size and sharded over the workers")
    g.add_argument("--image-size", type=positive_int, help="scale the models' input down "
                   "(default: each model's benchmark size)")
    g.add_argument("--steps", type=positive_int, help="measured steps per worker (default "
                   f"{DEFAULT_STEPS}; {_D.steps} in the default comparison)")
    g.add_argument("--warmup", type=positive_int, help="warm-up steps "
                   f"per worker before measuring (default {DEFAULT_WARMUP}; {_D.warmup} in the "
                   "default comparison)")


def _add_cluster_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the cluster")
    g.add_argument("--devices", nargs="+", type=positive_int, metavar="N",
                   help="devices per job, one or more (default 4); the mode sets workers and PS")
    g.add_argument("--workers", type=positive_int, help="explicit workers (with --ps; overrides "
                   "--devices)")
    g.add_argument("--ps", type=positive_int, help="explicit PS tasks (ralp modes use 1)")
    g.add_argument("--fc-workers", type=_fc_workers, metavar="F|auto", help="mode stanza: FC "
                   "ranks out of each job's N devices (default 1, as in every run of the "
                   "Stanza paper; at most N/2); auto: Stanza's node assignment, the n_c / n_f "
                   "split the planner predicts fastest (netns, from --compute-profile or a "
                   "calibration measured first)")
    g.add_argument("--device-type", choices=("cpu", "gpu"), default="cpu",
                   help="gpu: each task uses its GPU, the RALP PS included")
    g.add_argument("--backend", choices=(*BACKENDS, "auto"), default="auto",
                   help="local (loopback), netns (shaped links, root), tf-config (a running "
                   "cluster); auto: netns if available, else local")
    g.add_argument("--bandwidth", help="netns: each task's link rate, e.g. 100mbit, 1gbit "
                   f"(default {DEFAULT_BANDWIDTH})")
    g.add_argument("--latency", help="netns: one-way delay per link, e.g. 1ms (needs netem)")
    g.add_argument("--dilation", default="auto", metavar="auto|off|D", help="netns: the "
                   "links slowed by the host's pace against the reference device, measured "
                   "before each budget's runs, figures in the reference's time (auto, "
                   "default); off; or a factor D")
    g.add_argument("--hostfile", metavar="FILE", help="tf-config, mode horovod: horovodrun's "
                   "host file ('host slots=N' lines); ranks are started over ssh")
    g.add_argument("--cluster", metavar="FILE", help="tf-config: a JSON file of the cluster "
                   '({"chief": [...], "worker": [...], "ps": [...]}); default: TF_CONFIG')
    g.add_argument("--device-cpus", nargs="+", metavar="CPUS", help="CPUs of each simulated "
                   "device (local, netns), one or more, each a run: a number (e.g. 0.45), "
                   "'auto' (default: the host's CPUs less a reserve for the coordinator and the "
                   "kernel's network work, over N) or 'shared' (no budget: tasks share the "
                   "host's CPUs); a device watcher named by $RALP_DEVICE_WATCHER may add words")
    g.add_argument("--jobs", type=positive_int, help="consolidation: J jobs at once over one "
                   "shared bottleneck link (netns); see --scenarios")
    g.add_argument("--scenarios", nargs="+", choices=SCENARIOS,
                   help="consolidation scenarios (default: all three)")


def _add_training_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("PS training")
    g.add_argument("--sync", nargs="+", metavar="SYNC",
                   help="PS modes: synchronization "
                   "paradigm(s), each a run: bsp, asp, ssp:S, dssp:L:U (default: "
                   "ParameterServerStrategy's own asynchronous scheduling)")
    g.add_argument("--slow-worker", metavar="INDEX:FACTOR", help="heterogeneity: worker INDEX "
                   "takes FACTOR times as long per step (an injected delay); INDEX:+SECONDS: a fixed "
                   "delay after each of its steps")
    g.add_argument("--pull-schedule", nargs="+", metavar="SCHEDULE",
                   help="PS modes: how workers pull their variables, each a run: default "
                   "(ParameterServerStrategy's own), layer, ibatch (Wang et al.'s "
                   "iBatch)")
    g.add_argument("--trace-pulls", action="store_true", help="PS modes: after measuring, "
                   "trace worker 0 for a few steps: the share of pull time hidden behind compute")


def _add_measuring_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("measuring and output")
    g.add_argument("--repeat", type=positive_int, default=1, metavar="R", help="run the whole "
                   "matrix R times, the order rotated each round; the table gives each "
                   "setting's median and min-max over the rounds (default 1)")
    g.add_argument("--out", metavar="JSON", help="write the records as JSON (and CSV beside)")
    g.add_argument("--csv", metavar="CSV", help="write the records as CSV here")
    g.add_argument("--plot", metavar="PNG", help="throughput vs plain PS and bytes per step")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    g.add_argument("--show", metavar="JSON", nargs="+", help="run nothing: print the table of "
                   "saved results, one or more files together (and write --out/--plot/--csv "
                   "from them)")
    g.add_argument("--as-rounds", action="store_true", help="with --show: the files are "
                   "rounds made apart (a bench run per round): each setting's k-th record, in "
                   "the order given, becomes its round k")


def _fc_workers(text: str) -> int | str:
    return AUTO if text == AUTO else positive_int(text)


def request_from(args: argparse.Namespace) -> BenchRequest:
    """The parsed options as a :class:`BenchRequest` (lists given as "a b" or "a,b")."""

    from ralp.bench.pace import dilation_choice

    def listed(values):
        return tuple(words(values)) if values else None

    return BenchRequest(
        models=(args.keras_model,) if args.keras_model else listed(args.models),
        modes=listed(args.modes),
        devices=tuple(args.devices) if args.devices else None, workers=args.workers,
        ps=args.ps, fc_workers=args.fc_workers, batch_size=args.batch_size, num_classes=args.num_classes, data=args.data,
        image_size=args.image_size, steps=args.steps, warmup=args.warmup,
        device_type=args.device_type, backend=args.backend, bandwidth=args.bandwidth,
        latency=args.latency, sync=listed(args.sync), slow_worker=args.slow_worker,
        pull_schedules=listed(args.pull_schedule), trace_pulls=args.trace_pulls,
        hostfile=args.hostfile, cluster_file=args.cluster,
        jobs=args.jobs,
        scenarios=tuple(args.scenarios) if args.scenarios else None,
        compute_profile=args.compute_profile,
        device_cpus=listed(args.device_cpus), repeat=args.repeat,
        dilation=dilation_choice(args.dilation),
    )


def run(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    interrupt_on_sigterm()  # every cluster, namespace and process is cleaned up then too
    try:
        if args.show:
            return _show(args)
        if args.as_rounds:
            raise UsageError("--as-rounds numbers the files of --show as rounds: give them "
                             "with --show FILE ...")
        return _run(request_from(args), args)
    except RalpError as e:  # every error of a bad request: BenchError, ClusterError, ...
        return fail(PROG, str(e))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; everything it started was stopped", file=sys.stderr)
        return 130


def _run(request: BenchRequest, args) -> int:
    from ralp.bench import report
    from ralp.cluster.zygote import warm_up

    implicit_csv = str(Path(args.out).with_suffix(".csv")) if args.out and not args.csv else None
    report.check_outputs(args.out, args.csv or implicit_csv, args.plot)  # before anything runs
    request.check_models()  # before TensorFlow's import: a bad name or size fails at once
    warm_up()  # the zygote imports TensorFlow while this process does the same
    quiet_tensorflow()  # first: TF's start-up banner would break the progress bar
    backend, why_not_netns = request.backend_choice()
    if why_not_netns:
        print(f"{PROG}: netns backend unavailable ({why_not_netns}); running on local loopback "
              "(bytes are predicted, not measured)", file=sys.stderr)
    auto = request.mode_names() == [AUTO]  # checks the modes asked for before anything starts
    modes, horovod_missing = _modes_offered(request, auto)
    launcher = _launcher(request, backend, modes)
    paces = _paces(request, launcher)  # before any run: --dilation checked against the backend
    if backend == "tf-config" or request.jobs:  # another host's devices; jobs not bounded
        request = replace(request, calibrate=False)
    choose, assign = _planner_choices(request, backend, launcher, auto, horovod_missing, paces)
    runs = [] if request.jobs else request.runs(modes, choose, assign)  # resolved here, once
    launcher.check(sorted({run.mode for run in runs}) if auto else modes)
    if backend != "tf-config":
        jobs = request.jobs or 0
        settings = [(run.device_cpus, run.devices) for run in runs] or [
            (cpus, n * jobs) for n in (request.devices or (4,))[:1]
            for cpus in request.cpu_budgets(n * jobs)]
        print(_budget_line(settings))
    for run in runs:
        if run.auto:
            print(f"{run.model} N={run.devices}: {run.auto['why']}")
    return _execute(request, runs, launcher, args, paces)


def _modes_offered(request: BenchRequest, auto: bool) -> tuple[list[str], str | None]:
    """(the modes to run, why Horovod is missing or None): without --modes (or with auto) a
    missing Horovod leaves its modes out, with a line that says so."""
    from ralp.horovod.launch import horovod_unavailable_reason

    horovod_missing = horovod_unavailable_reason() if request.modes is None or auto else None
    if horovod_missing:
        print(f"{PROG}: leaving out modes horovod and stanza: {horovod_missing}"
              + ("" if auto else "; collective (TensorFlow's own allreduce) runs in "
                 "horovod's place"), file=sys.stderr)
    return request.mode_names(horovod_missing), horovod_missing


def _launcher(request: BenchRequest, backend: str, modes: list[str]):
    from ralp.bench.launcher import Launcher

    ps_on_cluster = backend == "tf-config" and (set(modes) - set(NO_PS_MODES) or request.jobs)
    return Launcher(
        backend,
        bandwidth=request.link_bandwidth(backend),
        latency=request.latency,
        device_type=request.device_type,
        cluster_spec=request.cluster_spec() if ps_on_cluster else None,
        hostfile=request.hostfile,
    )


def _planner_choices(request: BenchRequest, backend: str, launcher, auto: bool,
                     horovod_missing: str | None, paces=None) -> tuple:
    """(--modes auto's chooser, --fc-workers auto's chooser): the planner's picks, or None;
    ``paces``: the links' dilation, which the predictions' compute follows."""
    if not (auto or request.fc_workers == AUTO):
        return None, None
    from ralp.bench.mode_choice import chooser, offered_modes

    if auto:
        return chooser(backend, launcher.bandwidth, request.compute_profile,
                       offered_modes(horovod_missing), paces), None
    # node assignment: the planner's best split among stanza's alone
    return None, chooser(backend, launcher.bandwidth, request.compute_profile,
                         (registry.STANZA,), paces)


def _execute(request: BenchRequest, runs: list, launcher, args, paces=None) -> int:
    """Run them; print and write the records, also after Ctrl-C (what was measured is kept).
    Returns the exit status: 1 if any run failed."""
    records: list[dict] = []
    try:
        if request.jobs:
            from ralp.bench.consolidate import run_consolidation

            run_consolidation(request, launcher, progress=not args.quiet, on_record=records.append)
        else:
            from ralp.bench.runner import run_all

            run_all(runs, launcher, calibrations=_calibrations(request, launcher),
                    paces=paces, progress=not args.quiet, on_record=records.append,
                    repeat=request.repeat)
    finally:
        if records:
            _print_records(records)
            _write(records, args)
    return 1 if any(r.get("error") for r in records) else 0


def _calibrations(request: BenchRequest, launcher):
    """Each workload's calibration before its runs, for their compute bound (None where
    the request takes none); on the simulated fabric they measure gRPC's CPU per byte at
    its link rate too."""
    if not request.calibrate:
        return None
    from ralp.bench.calibrated import Calibrations

    netns = launcher.backend == "netns" and launcher.bandwidth
    return Calibrations(transfer_rate=launcher.bandwidth if netns else None)


def _paces(request: BenchRequest, launcher):
    """The pace of each budget's devices, dilating the simulated links (None: no links to
    dilate, or --dilation off)."""
    from ralp.bench.pace import OFF, Paces
    from ralp.bench.runspec import BenchError

    if launcher.backend != "netns" or request.dilation == OFF:
        if request.dilation not in ("auto", OFF):
            raise BenchError("--dilation slows the simulated links: it needs the netns backend")
        return None
    return Paces(request.dilation, launcher.bandwidth, launcher.latency)


def _budget_line(settings: list[tuple[str, int]]) -> str:
    """One line: what each simulated device computes with (or why the host is shared), for
    each (``--device-cpus`` value, devices on the host)."""
    from ralp.emulation.budget import budget_for

    seen = {}
    for cpus, devices in settings:
        budget = budget_for(cpus, devices)
        if budget.fallback:
            return f"devices: shared CPUs, no budgets ({budget.fallback})"
        seen.setdefault(f"N={devices}", []).append(budget.describe())
    parts = [f"{n}: {'; '.join(dict.fromkeys(texts))}" for n, texts in seen.items()]
    return "devices: " + "; ".join(parts)


def _print_records(records: list[dict]) -> None:
    from ralp.bench import report
    from ralp.bench.records import add_speedups, consolidated

    jobs = [r for r in records if consolidated(r)]
    solo = add_speedups([r for r in records if not consolidated(r)])
    if solo:
        print(report.to_table(solo))
        verdicts = {r["model"]: r.get("profiler_verdict") for r in solo}
        for model, verdict in verdicts.items():
            if verdict:
                print(f"profiler on {model}: {verdict}")
        for r in solo:
            if r.get("auto"):
                print(f"{r['model']} N={r['devices']}: {r['auto']['why']}")
    if jobs:
        print(report.consolidation_table(jobs))


def _write(records: list[dict], args) -> None:
    """Write the outputs asked for; where a write fails after all, the records go to a file
    of their own, and the output says where: nothing measured is lost."""
    from ralp.bench import report

    try:
        for path in report.write_outputs(records, args.out, args.csv, args.plot):
            print(f"wrote {path}")
    except OSError as e:
        kept = report.keep_records(records)
        print(f"{PROG}: could not write {e.filename or 'the outputs'} ({e.strerror or e}); the "
              f"records are in {kept}", file=sys.stderr)


def _show(args) -> int:
    from ralp.bench import report

    records: list = []
    for path in args.show:
        try:
            with open(path) as f:
                saved = json.load(f)
        except OSError as e:
            raise UsageError(f"cannot read --show {path!r}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise UsageError(f"--show {path!r} is not JSON: {e}") from None
        if not isinstance(saved, list) or not all(isinstance(r, dict) for r in saved):
            raise UsageError(f"--show {path!r} is not a list of bench records")
        records += saved
    if args.out and any(Path(args.out).resolve() == Path(p).resolve() for p in args.show):
        raise UsageError(f"--out {args.out!r} is one of the --show files: write elsewhere")
    if args.as_rounds:
        from ralp.bench.rounds import numbered_as_rounds

        records = numbered_as_rounds(records)
    _print_records(records)
    for path in report.write_outputs(records, args.out, args.csv, args.plot):
        print(f"wrote {path}")
    return 0


def main() -> None:
    sys.exit(run())
