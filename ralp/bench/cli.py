"""``python -m ralp.bench``: plain PS vs RALP, measured on a real or simulated cluster.

With no arguments it runs a small comparison that shows the effect on a 2-core machine in a
few minutes: scaled vgg11 and resnet50, plain PS vs RALP-N on 4 devices, on shaped simulated
links (the netns backend) when this machine allows it, on loopback otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence

from ralp._cli import UsageError, fail, positive_int, quiet_tensorflow, words
from ralp.bench.config import (
    BACKENDS,
    DATA,
    DEFAULT_STEPS,
    DEFAULT_WARMUP,
    MODES,
    BenchError,
    RunSpec,
)
from ralp.ps_strategy.cluster import ClusterError, ClusterSpec

PROG = "python -m ralp.bench"

# The default comparison: FC-heavy vgg11 against resnet50 (almost no FC), scaled down so a
# 2-core machine runs all four runs in about three minutes.
DEFAULT_MODELS = ("vgg11", "resnet50")
DEFAULT_MODES = ("ps", "ralp-n", "horovod")  # horovod left out (with a note) if not installed
DEFAULT_DEVICES = (4,)
DEFAULT_IMAGE_SIZE = {"vgg11": 64, "resnet50": 32}
DEFAULT_BATCH_SIZE = 8
DEFAULT_RUN_STEPS = 5  # per worker
DEFAULT_BANDWIDTH = "1gbit"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Benchmark plain parameter-server training against RALP layer placement "
        "(and the modes' resource configurations) on a cluster: images/s, step time, and "
        "bytes per step measured on each link and predicted by the profiler.",
        epilog="Without arguments: a small default comparison (scaled vgg11 and resnet50, "
        "ps vs ralp-n vs horovod, N=4, netns at 1gbit when run as root, else local).",
    )
    p.add_argument("--models", nargs="+", metavar="MODEL",
                   help="zoo models, by spaces or commas (default: "
                   f"{' '.join(DEFAULT_MODELS)})")  # fmt: skip
    p.add_argument("--modes", nargs="+", metavar="MODE",
                   help=f"from {', '.join(MODES)}, by spaces or commas (default: "
                   f"{' '.join(DEFAULT_MODES)})")  # fmt: skip
    p.add_argument("--devices", nargs="+", type=positive_int, metavar="N",
                   help="devices per job, one or more (default 4); the mode sets workers and PS")  # fmt: skip
    p.add_argument("--workers", type=positive_int, help="explicit workers (with --ps; overrides "
                   "--devices)")  # fmt: skip
    p.add_argument("--ps", type=positive_int, help="explicit PS tasks (ralp modes use 1)")
    p.add_argument("--batch-size", type=positive_int, help="per-worker batch (default: the "
                   "model's benchmark default)")  # fmt: skip
    p.add_argument("--num-classes", type=positive_int,
                   help="1000 (ImageNet-1K, default) or 21841 (ImageNet-22K); 10 with --data "
                   "digits")  # fmt: skip
    p.add_argument("--data", choices=DATA, default="synthetic",
                   help="synthetic batches (default) or the real scikit-learn digits, resized "
                   "to --image-size and sharded over the workers")  # fmt: skip
    p.add_argument("--image-size", type=positive_int, help="scale the models' input down "
                   "(default: each model's benchmark size)")  # fmt: skip
    p.add_argument("--steps", type=positive_int, help="measured steps per worker (default "
                   f"{DEFAULT_STEPS}; {DEFAULT_RUN_STEPS} in the default comparison)")  # fmt: skip
    p.add_argument("--warmup", type=positive_int, default=DEFAULT_WARMUP, help="warm-up steps "
                   f"per worker before measuring (default {DEFAULT_WARMUP})")  # fmt: skip
    p.add_argument("--device-type", choices=("cpu", "gpu"), default="cpu",
                   help="gpu: each task uses its GPU, the RALP PS included")  # fmt: skip
    p.add_argument("--backend", choices=(*BACKENDS, "auto"), default="auto",
                   help="local (loopback), netns (shaped links, root), tf-config (a running "
                   "cluster); auto: netns if available, else local")  # fmt: skip
    p.add_argument("--bandwidth", help="netns: each task's link rate, e.g. 100mbit, 1gbit")
    p.add_argument("--latency", help="netns: one-way delay per link, e.g. 1ms (needs netem)")
    p.add_argument("--sync", nargs="+", metavar="SYNC",
                   help="PS modes: synchronization "
                   "paradigm(s), each a run: bsp, asp, ssp:S, dssp:L:U (default: "
                   "ParameterServerStrategy's own asynchronous scheduling)")  # fmt: skip
    p.add_argument("--slow-worker", metavar="INDEX:FACTOR", help="heterogeneity: worker INDEX "
                   "takes FACTOR times as long per step (an injected delay); INDEX:+SECONDS: a fixed "
                   "delay after each of its steps")  # fmt: skip
    p.add_argument("--hostfile", metavar="FILE", help="tf-config, mode horovod: horovodrun's "
                   "host file ('host slots=N' lines); ranks are started over ssh")  # fmt: skip
    p.add_argument("--cluster", metavar="FILE", help="tf-config: a JSON file of the cluster "
                   '({"chief": [...], "worker": [...], "ps": [...]}); default: TF_CONFIG')  # fmt: skip
    p.add_argument("--compute-reference", action="store_true", help="also run each config "
                   "unshaped on loopback for the compute-only step time and bound ratio")  # fmt: skip
    p.add_argument("--jobs", type=positive_int, help="consolidation: J jobs at once over one "
                   "shared bottleneck link (netns); see --scenarios")  # fmt: skip
    p.add_argument("--scenarios", nargs="+", choices=("all-ralp", "all-ps", "mixed"),
                   help="consolidation scenarios (default: all three)")  # fmt: skip
    p.add_argument("--out", metavar="JSON", help="write the records as JSON (and CSV beside)")
    p.add_argument("--csv", metavar="CSV", help="write the records as CSV here")
    p.add_argument("--plot", metavar="PNG", help="throughput vs plain PS and bytes per step")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--show", metavar="JSON", help="run nothing: print the table of saved "
                   "results (and write --plot/--csv from them)")  # fmt: skip
    return p


def _cluster_spec(args) -> ClusterSpec:
    if args.cluster:
        try:
            with open(args.cluster) as f:
                return ClusterSpec.from_dict(json.load(f))
        except OSError as e:
            raise UsageError(f"cannot read --cluster {args.cluster!r}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise UsageError(f"--cluster {args.cluster!r} is not JSON: {e}") from None
    spec, job, _ = ClusterSpec.from_tf_config(os.environ.get("TF_CONFIG"))
    if job != "chief":
        raise UsageError(f"TF_CONFIG says this is task {job!r}; run the bench as the 'chief' "
                         "(each other host runs python -m ralp.server)")  # fmt: skip
    return spec


def _backend(args) -> str:
    if args.backend != "auto":
        return args.backend
    from ralp.ps_strategy.netns import netns_unavailable_reason

    reason = netns_unavailable_reason()
    if reason:
        print(f"{PROG}: netns backend unavailable ({reason}); running on local loopback "
              "(bytes are predicted, not measured)", file=sys.stderr)  # fmt: skip
        return "local"
    return "netns"


def workload_for(args, model: str, default: bool) -> dict:
    """RunSpec fields other than model and resources: what was asked, else the defaults."""
    return dict(
        batch_size=args.batch_size or (DEFAULT_BATCH_SIZE if default else None),
        image_size=args.image_size or (DEFAULT_IMAGE_SIZE.get(model) if default else None),
        num_classes=args.num_classes or (10 if args.data == "digits" else 1000),
        data=args.data,
        slow_worker=args.slow_worker,
        steps=args.steps or (DEFAULT_RUN_STEPS if default else DEFAULT_STEPS),
        warmup=args.warmup,
        device_type=args.device_type,
    )


def _runs(args, default: bool) -> list[RunSpec]:
    from ralp.models import MODEL_NAMES

    models = args.models or list(DEFAULT_MODELS)
    unknown = [m for m in models if m not in MODEL_NAMES]
    if unknown:
        raise UsageError(f"unknown model(s) {unknown}; the zoo has {', '.join(MODEL_NAMES)}")
    modes = args.modes or default_modes()
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise UsageError(f"unknown mode(s) {unknown}; choose from {', '.join(MODES)}")
    if args.sync and not set(modes) - {"horovod"}:
        raise UsageError("--sync is for the PS modes (ps, ralp-h, ralp-n); Horovod is "
                         "synchronous by construction")  # fmt: skip
    runs = []
    for model in models:
        for n in args.devices or DEFAULT_DEVICES:
            for mode, sync in [(m, s) for m in modes for s in _syncs(args, m)]:
                workload = {**workload_for(args, model, default), "sync": sync}
                if args.workers and mode == "horovod":
                    w = args.workers
                    runs.append(RunSpec(model, mode, w, w, 0, **workload).resolved())
                elif args.workers or args.ps:
                    w, ps = args.workers or 1, args.ps or 1
                    runs.append(RunSpec(model, mode, w + ps, w, ps, **workload).resolved())
                else:
                    runs.append(RunSpec.for_devices(model, mode, n, **workload).resolved())
    return runs


def default_modes(note: bool = False) -> list[str]:
    """The default comparison's modes: Horovod only where it is installed."""
    from ralp.baselines.horovod_launch import horovod_unavailable_reason

    reason = horovod_unavailable_reason()
    if reason is None:
        return list(DEFAULT_MODES)
    if note:
        print(f"{PROG}: leaving out mode horovod: {reason}", file=sys.stderr)
    return [m for m in DEFAULT_MODES if m != "horovod"]


def _syncs(args, mode: str) -> list[str | None]:
    """The sync paradigms a mode runs under: each of --sync for the PS modes."""
    if not args.sync or mode == "horovod":
        return [None]
    return list(args.sync)


def run(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    for name in ("models", "modes", "sync"):  # "a b" and "a,b" alike
        if getattr(args, name):
            setattr(args, name, words(getattr(args, name)))
    # Without --models, the small default comparison's workload (scaled sizes, fewer steps)
    # fills in what was not asked for; naming models means the paper's defaults.
    default = args.models is None
    # SIGTERM ends the run like Ctrl-C: every cluster, namespace and process is cleaned up.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if args.show:
            return _show(args)
        return _run(args, default)
    except (UsageError, BenchError, ClusterError) as e:
        return fail(PROG, str(e))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; everything it started was stopped", file=sys.stderr)
        return 130


def _run(args, default: bool) -> int:
    from ralp.bench import report
    from ralp.bench.launcher import Launcher
    from ralp.bench.runner import run_all

    quiet_tensorflow()  # first: TF's start-up banner would break the progress bar
    backend = _backend(args)
    bandwidth = args.bandwidth
    if backend == "netns" and bandwidth is None:
        bandwidth = DEFAULT_BANDWIDTH
    modes = set(args.modes or default_modes(note=True))
    ps_on_cluster = backend == "tf-config" and (modes - {"horovod"} or args.jobs)
    launcher = Launcher(
        backend,
        bandwidth=bandwidth,
        latency=args.latency,
        device_type=args.device_type,
        cluster_spec=_cluster_spec(args) if ps_on_cluster else None,
        hostfile=args.hostfile,
    )
    launcher.check(modes)
    if args.jobs:
        from ralp.bench.consolidate import run_consolidation

        return run_consolidation(args, launcher, default)
    runs = _runs(args, default)
    records: list[dict] = []
    try:
        run_all(runs, launcher, compute_reference=args.compute_reference,
                progress=not args.quiet, on_record=records.append)  # fmt: skip
    finally:
        # Ctrl-C keeps what was measured: the finished records are still written.
        report.add_speedups(records)
        if records:
            print(report.to_table(records))
            verdicts = {r["model"]: r.get("profiler_verdict") for r in records}
            for model, verdict in verdicts.items():
                if verdict:
                    print(f"profiler on {model}: {verdict}")
            for path in report.write_outputs(records, args.out, args.csv, args.plot):
                print(f"wrote {path}")
    return 1 if any(r.get("error") for r in records) else 0


def _show(args) -> int:
    from ralp.bench import report

    try:
        with open(args.show) as f:
            records = json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read --show {args.show!r}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"--show {args.show!r} is not JSON: {e}") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise UsageError(f"--show {args.show!r} is not a list of bench records")
    consolidated = [r for r in records if r.get("job") is not None]
    plain = [r for r in records if r.get("job") is None]
    if plain:
        print(report.to_table(report.add_speedups(plain)))
    if consolidated:
        print(report.consolidation_table(consolidated))
    for path in report.write_outputs(records, None, args.csv, args.plot):
        print(f"wrote {path}")
    return 0


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def main() -> None:
    sys.exit(run())
