"""``python -m ralp.planner``: predict every mode's throughput for a model and cluster, choose,
and check the predictions against recorded runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from functools import cache

from ralp._cli import (
    UsageError,
    fail,
    finite_float,
    interrupt_on_sigterm,
    positive_float,
    positive_int,
    quiet_tensorflow,
)
from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_THRESHOLD
from ralp.errors import RalpError
from ralp.planner.modes import MODES

PROG = "python -m ralp.planner"
FORMATS = ("table", "json")
# the PS modes' step on devices: past an epoch's first cycles, inside them, the queueing
# network alone (ralp.planner.workload.Workload)
STEP_MODELS = ("steady", "in-step", "queue")


def _parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Predict the throughput of ps, ralp-h, ralp-n, horovod and stanza for a model on "
        "a cluster, pick the best, and validate the model against recorded bench runs.",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument("--calibrate", action="store_true",
                      help="measure the model's compute times on this host into --output")
    what.add_argument("--validate", nargs="+", metavar="RESULTS.json",
                      help="predict every recorded netns run of these bench results")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", help="a model of the zoo")
    src.add_argument("--keras-model", metavar="PATH", help="a saved .keras model file")
    p.add_argument("--batch-size", type=positive_int, help="per-worker batch (default: the "
                   f"model's benchmark default; {DEFAULT_BATCH_SIZE} for --keras-model)")
    p.add_argument("--image-size", type=positive_int, help="zoo model input side")
    p.add_argument("--num-classes", type=positive_int, default=1000)
    p.add_argument("--devices", type=positive_int, nargs="+", default=[4],
                   help="devices N (several: an extrapolation)")
    p.add_argument("--bandwidth", nargs="+", default=["1gbit"],
                   help="every link's rate, tc style (several: one curve each)")
    p.add_argument("--compute-profile", metavar="FILE",
                   help="a calibration JSON (from --calibrate, here or on another host)")
    p.add_argument("--compute-profile-for", metavar="RECORDS=FILE", action="append",
                   default=[], help="--validate on budgeted records: the calibration taken "
                   "beside the runs of RECORDS (a results file given to --validate), for its "
                   "records that carry none (repeat it for several files)")
    p.add_argument("--shared-host", action="store_true",
                   help="all tasks share this host's cores (the simulated netns cluster); "
                   "without it a recommendation is for a real cluster, a task per machine")
    p.add_argument("--device-cpus", metavar="CPUS", help="--calibrate: measure on one device "
                   "of the budgeted simulated cluster of --devices N devices: 'auto' (the "
                   "bench's default budget) or CPUs per device")
    p.add_argument("--output", metavar="FILE", help="--calibrate: the calibration JSON to "
                   "write (entries of an existing file are kept)")
    p.add_argument("--steps", type=positive_int, default=None, help="--calibrate: timed steps")
    p.add_argument("--fit-half", action="store_true",
                   help="--validate: fit the shared host's capacity on every other "
                   "record and report the errors on the held-out rest")
    p.add_argument("--overlap-from", metavar="FILE", nargs="+",
                   help="a calibration (--calibrate --device-cpus) whose rings' measured "
                   "overlaps (and per-transfer CPU, gRPC's CPU on the fabric) serve: with "
                   "--validate, records whose calibrations predate them (several files: "
                   "each record takes the one of its own budget); "
                   "with --calibrate --model, this calibration (same budget), whose rings "
                   "are then not probed again")
    p.add_argument("--overlap-ratios", type=positive_float, nargs="+", metavar="R",
                   help="--calibrate --device-cpus: the wire/CPU ratios to measure each ring's "
                   "overlap at (default 1; several give a curve the model reads at each "
                   "phase's own ratio)")
    p.add_argument("--transfer-rates", nargs="+", metavar="RATE", default=(),
                   help="--calibrate --device-cpus --model: measure gRPC's CPU per byte on "
                   "the simulated fabric at these link rates too (tc style; the bench's "
                   "--calibrate gives its --bandwidth)")
    p.add_argument("--step-model", choices=STEP_MODELS, default="steady",
                   help="--validate: the PS modes' step on devices past an epoch's first "
                        "cycles (default: a worker's step alone from its layer pipeline, "
                        "the workers queueing beyond it), inside them "
                        "(in-step: plain PS's workers in step), or from the queueing "
                        "network alone, as before (queue; docs/planner.md)")
    real = p.add_argument_group("a real cluster (docs/planner.md)")
    real.add_argument("--nodes", type=positive_int, nargs="+", metavar="K",
                      help="plan nodes of several GPUs: K nodes (several: one row each); "
                      "--bandwidth is then each node's NIC")
    real.add_argument("--gpus-per-node", type=positive_int, default=1, metavar="G")
    real.add_argument("--intra-node-bandwidth", metavar="RATE", help="each GPU's link "
                      "inside its node (default: PCIe 3.0 x16, 126gbit)")
    real.add_argument("--device-throughput", type=positive_float, metavar="IMAGES_PER_S",
                      help="one GPU's training throughput at this batch, as you measured it")
    real.add_argument("--modes", nargs="+", choices=MODES, help="the candidate modes")
    real.add_argument("--sync", choices=("async", "bsp"), default="async",
                      help="the PS modes' synchronization")
    real.add_argument("--horovod-build", choices=("installed", "nccl", "gloo", "none"),
                      default="installed", help="the cluster's Horovod: its GPU operations "
                      "(gloo: gradients through host memory), or none")
    real.add_argument("--save", metavar="DIR", help="write the chosen configuration "
                      "(ralp_plan.json) and the commands that run it (cmd_optimal.txt)")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--plot", metavar="PNG", help="draw the prediction (and write its CSV "
                   "beside: same name, .csv)")
    p.add_argument("--csv", metavar="CSV", help="write every prediction as CSV here")
    p.add_argument("--threshold", type=finite_float, default=DEFAULT_THRESHOLD,
                   help="the skewness rule's K, shown beside the planner's choice")
    return p


@cache
def _zoo_workload(model: str, batch_size: int, image_size: int, num_classes: int):
    from ralp.models import build_model
    from ralp.planner.workload import Workload
    from ralp.profiler.api import profile

    return Workload(profile(build_model(model, num_classes, image_size), batch_size))


def _queue_workload(model: str, batch_size: int, image_size: int, num_classes: int):
    from dataclasses import replace

    return replace(_zoo_workload(model, batch_size, image_size, num_classes), pipeline=False)


def _in_step_workload(model: str, batch_size: int, image_size: int, num_classes: int):
    from dataclasses import replace

    return replace(_zoo_workload(model, batch_size, image_size, num_classes), in_step=True)


def _workload_for(args):
    return {"queue": _queue_workload, "in-step": _in_step_workload}.get(args.step_model,
                                                                        _zoo_workload)


def _calibrate(args) -> str:
    import os

    from ralp.defaults import DEFAULT_BATCH_SIZE
    from ralp.models import get_model_spec
    from ralp.planner.api import calibrate, calibrate_zoo
    from ralp.planner.calibration import DEFAULT_CALIBRATION_STEPS, Calibration

    if not args.output:
        raise UsageError("--calibrate needs --output FILE (the calibration JSON to write)")
    steps = args.steps or DEFAULT_CALIBRATION_STEPS
    if args.device_cpus is not None and args.shared_host:
        raise UsageError("--device-cpus measures one budgeted device; --shared-host a host "
                         "whose tasks share its CPUs: give one of them")
    on_device = {"device_cpus": args.device_cpus, "devices": args.devices[0]}
    overlaps = _lent_overlaps(args)
    if args.model is not None:
        spec = get_model_spec(args.model)
        batch = args.batch_size or spec.default_batch_size
        image = args.image_size or spec.default_image_size
        new = calibrate_zoo(args.model, batch, image, args.num_classes,
                            shared_host=args.shared_host, steps=steps, overlaps=overlaps,
                            overlap_ratios=tuple(args.overlap_ratios) if args.overlap_ratios
                            else None, transfer_rates=_transfer_rates(args),
                            **on_device)
        name = args.model
    elif args.keras_model is not None:
        from ralp.profiler.cli import _load_keras_model

        model = _load_keras_model(args.keras_model)
        batch = args.batch_size or DEFAULT_BATCH_SIZE
        new = calibrate(model, batch, shared_host=args.shared_host, steps=steps, **on_device)
        name, image = model.name, new.entries[0].image_size
    else:
        raise UsageError("--calibrate needs --model NAME (a zoo model) or --keras-model PATH")
    entries = Calibration.load(args.output).entries if os.path.exists(args.output) else []
    cal = Calibration(new.host, entries, new.machine)
    cal.add(new.entries[0])
    cal.save(args.output)
    return _calibration_summary(name, batch, image, new.entries[0], new.host, args.output)


def _transfer_rates(args) -> tuple[int, ...]:
    """``--transfer-rates`` in bits/s, after its usage check."""
    from ralp.errors import ClusterError
    from ralp.units import parse_bandwidth

    if args.transfer_rates and args.device_cpus is None:
        raise UsageError("--transfer-rates measures gRPC's CPU between two budgeted devices: "
                         "give --device-cpus")
    try:
        return tuple(parse_bandwidth(rate) for rate in args.transfer_rates)
    except ClusterError as e:
        raise UsageError(f"--transfer-rates: {e}") from None


def _lent_overlaps(args):
    """The rings' overlaps ``--overlap-from`` lends a calibration (None: measure them), after
    the usage checks of it and of ``--overlap-ratios``."""
    from ralp.planner.calibration import Calibration

    if args.overlap_ratios and (args.device_cpus is None or args.model is None):
        raise UsageError("--overlap-ratios measures the rings of a zoo model's calibration on "
                         "budgeted devices: give --model NAME and --device-cpus")
    if not args.overlap_from:
        return None
    if args.device_cpus is None or args.model is None:
        raise UsageError("--calibrate --overlap-from serves a zoo model's calibration on "
                         "budgeted devices: give --model NAME and --device-cpus")
    if args.overlap_ratios:
        raise UsageError("--overlap-from takes the rings' overlaps measured before; "
                         "--overlap-ratios measures them: give one of them")
    if len(args.overlap_from) > 1:
        raise UsageError("--calibrate --overlap-from takes one calibration (of this budget)")
    return Calibration.load(args.overlap_from[0]).host


def _calibration_summary(name: str, batch: int, image: int, entry, host, output: str) -> str:
    return (
        f"{name} batch {batch} image {image}: whole model {entry.full_s:.4f} s, tail "
        f"(after {entry.split_after}) {entry.tail_s:.4f} s per step; a transfer costs "
        f"{host.message_s * 1e3:.2f} ms + {host.cpu_s_per_byte * 1e9:.2f} ns CPU per byte"
        + (f" + {host.cpu_s_per_message * 1e3:.3f} ms CPU per transfer"
           if host.cpu_s_per_message is not None else "")
        + (f" (Horovod's ring: {host.ring_cpu_s_per_byte * 1e9:.2f} ns)"
           if host.ring_cpu_s_per_byte is not None else "")
        + (f" (TensorFlow's ring: {host.collective_cpu_s_per_byte * 1e9:.2f} ns)"
           if host.collective_cpu_s_per_byte is not None else "")
        + "".join(f"; {ring}'s ring hides {_overlap_text(share, curve)} of the smaller of "
                  f"its wire and CPU" + (f", its wire {factor:.2f}x its bytes at the links' rate"
                                         if factor is not None else "")
                  for ring, share, curve, factor in (
                      ("Gloo", host.ring_overlap, host.ring_overlaps, host.ring_wire_factor),
                      ("TensorFlow", host.collective_overlap, host.collective_overlaps,
                       host.collective_wire_factor))
                  if share is not None or curve)
        + "".join(f"; gRPC on the fabric at {rate / 1e6:g} Mbit/s: {cost * 1e9:.2f} ns CPU per byte"
                  for rate, cost in host.fabric_cpu_s_per_byte)
        + (f"; measured on one device of {host.device_cpus:g} CPU" if host.device_cpus else
           f"; host capacity {host.capacity:.2f} concurrent steps")
        + f"; wrote {output}"
    )


def _overlap_text(share: float | None, curve: tuple) -> str:
    if not curve:
        return f"{share:.0%}"
    return ", ".join(f"{o:.0%} at wire/CPU {r:.2g}" for r, o in curve)


def _validate(args) -> str:
    from ralp.planner import repeats, validate
    from ralp.planner.calibration import Calibration

    records = validate.load_records(args.validate)
    if not records:
        raise UsageError(f"no successful netns run in {' '.join(args.validate)}: nothing to "
                         "validate (python -m ralp.bench --backend netns --out FILE records some)")
    if any(repeats.budgeted(r) for _, r in records) and not args.fit_half:
        return _validate_repeats(args, [(s, r) for s, r in records if repeats.budgeted(r)])
    if args.compute_profile_for:
        raise UsageError("--compute-profile-for serves budgeted records (--device-cpus runs); "
                         "give these records' calibration as --compute-profile FILE")
    carried = sum(1 for _, r in records if r.get("calibration"))
    if not args.compute_profile and carried < len(records):
        raise UsageError(f"--validate needs --compute-profile FILE (a calibration JSON): "
                         f"{len(records) - carried} of the {len(records)} records carry no "
                         "calibration of their own (python -m ralp.bench --calibrate)")
    cal = Calibration.load(args.compute_profile) if args.compute_profile else None
    extra: dict = {"own_calibrations": carried}
    if cal is not None:
        extra.update(shared_host=cal.host.shared, cpu_s_per_byte=cal.host.cpu_s_per_byte)
    if args.fit_half:
        value, fitted, held_out = validate.split_half_fit(
            records, cal, _workload_for(args), validate.CAPACITY_GRID
        )
        rows = held_out
        extra.update(capacity=value, fit_half=validate.errors(fitted),
                     held_out_half=validate.errors(held_out))
        note = (f"host capacity = {value:.3g} fitted on {len(fitted)} records (median "
                f"|error| {extra['fit_half']['median_abs_error']:.1%} there); the held-out "
                f"{len(held_out)} records:")
    else:
        rows = validate.predict_records(records, cal, _workload_for(args))
        # each workload's measured capacity (the host's where a workload has none)
        if cal is not None:
            extra["capacity"] = {f"{e.model} b{e.batch_size} {e.image_size}px":
                                 e.host_for(cal.host).capacity for e in cal.entries}
        note = ""
    if args.format == "json":
        return validate.to_json(rows, **extra)
    return (note + "\n" if note else "") + validate.to_text(rows)


def _calibrations_by_file(pairs: list[str], sources: set[str], validated: list[str]) -> dict:
    """``--compute-profile-for RECORDS=FILE`` pairs: a results file's name -> its calibration
    (records know their file by name alone, so two --validate files must not share one)."""
    from collections import Counter
    from pathlib import Path

    from ralp.planner.calibration import Calibration

    names = Counter(Path(v).name for v in validated)
    out = {}
    for pair in pairs:
        records, sep, path = pair.partition("=")
        name = Path(records).name
        if not sep or not records or not path:
            raise UsageError(f"--compute-profile-for takes RECORDS=FILE (a results file of "
                             f"--validate, then its calibration), not {pair!r}")
        if name not in sources:
            raise UsageError(f"--compute-profile-for {pair}: {records} is not a file of "
                             f"--validate with budgeted records ({', '.join(sorted(sources))})")
        if names[name] > 1:
            raise UsageError(f"--compute-profile-for {pair}: {names[name]} files of --validate "
                             f"are named {name}; copy one under another name")
        out[name] = Calibration.load(path)
    return out


def _validate_repeats(args, records: list[tuple[str, dict]]) -> str:
    """Budgeted records: each setting's median and noise band (ralp.planner.repeats)."""
    import json
    import statistics

    from ralp.planner import repeats, validate
    from ralp.planner.calibration import Calibration

    by_file = _calibrations_by_file(args.compute_profile_for, {s for s, _ in records},
                                    args.validate)
    cal = Calibration.load(args.compute_profile) if args.compute_profile else None
    # each record's calibration where it carries none: its file's, else the one for all
    fallback = {id(r): by_file.get(s, cal) for s, r in records}
    missing = sum(1 for _, r in records if not r.get("calibration") and fallback[id(r)] is None)
    if missing:
        raise UsageError(f"--validate needs --compute-profile FILE: {missing} of the "
                         f"{len(records)} budgeted records carry no calibration of their own "
                         "(python -m ralp.bench --calibrate; or --compute-profile-for "
                         "RECORDS=FILE, the one taken beside a file's runs)")
    lent = [Calibration.load(path).host for path in args.overlap_from or ()]

    def predicted(setting) -> float:
        """The median of its rounds' predictions, each from the calibration taken beside
        that round (the bench calibrates each round; older files carry one for all, and
        others were calibrated apart: --compute-profile-for)."""
        own = [r for r in setting.records if r.get("calibration")] or setting.records[:1]
        return statistics.median(validate.predict_record(
            r, fallback[id(r)], _workload_for(args), validate.lent_for(r, lent))
            for r in own)

    report = repeats.validate(repeats.settings_of(r for _, r in records), predicted)
    report["excluded_flagged"] = sum(1 for _, r in records if repeats.flagged(r))
    if args.format == "json":
        return json.dumps(report, indent=2)
    return repeats.to_text(report)


def run(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """The command's work; ``prog``: the name it was run by (``python -m ralp.plan`` is the
    same command)."""
    args = _parser(prog).parse_args(argv)
    if args.model is not None:  # the zoo's table needs no TensorFlow: a bad name fails at once
        from ralp.models import get_model_spec

        try:
            get_model_spec(args.model)
        except ValueError as e:
            return fail(prog, str(e))
    quiet_tensorflow()
    interrupt_on_sigterm()  # as Ctrl-C: a calibration's devices and processes are removed
    try:
        if args.calibrate:
            output = _calibrate(args)
        elif args.validate:
            output = _validate(args)
        elif args.nodes:
            from ralp.planner.recommend import cluster_cli

            output = cluster_cli(args, _zoo_workload)
        else:
            from ralp.planner.recommend import recommend_cli

            output = recommend_cli(args, _zoo_workload)
    except (RalpError, ValueError) as e:
        return fail(prog, str(e))
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; everything it started was stopped", file=sys.stderr)
        return 130
    sys.stdout.write(output if output.endswith("\n") else output + "\n")
    return 0


def main(prog: str = PROG) -> None:
    sys.exit(run(prog=prog))
