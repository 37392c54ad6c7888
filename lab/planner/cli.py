"""``python -m lab.planner``: the planner with the simulated cluster's own step models and
the tools that check them against the bench's recorded runs (``--validate``), beside the
user's command ``python -m ralp.planner`` (whose plans come from the core alone).

Its options beyond the user's: ``--validate`` and ``--step-model``, ``--compute-profile-for``,
``--fit-half``, ``--overlap-from`` for it; ``--shared-host`` (every task on this host's cores)
and ``--device-cpus`` (one budgeted device) for a plan or a calibration of the simulated
cluster; ``--overlap-ratios`` and ``--transfer-rates`` for a calibration's ring and fabric
probes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ralp._cli import (
    UsageError,
    positive_float,
)
from ralp.planner.cli import answer as user_work
from ralp.planner.cli import parser as user_parser
from ralp.planner.cli import zoo_workload
from ralp.planner.command import run_command

PROG = "python -m lab.planner"
# the PS modes' step on devices: past an epoch's first cycles, inside them, the queueing
# network alone (lab.planner.device_workload.DeviceWorkload)
STEP_MODELS = ("steady", "in-step", "queue")


def _parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The user's planner options, and the lab's."""
    p = user_parser(prog)
    p.description = ("The planner with the simulated cluster's step models: plan the "
                     "simulated cluster, calibrate its probes, validate against recorded runs.")
    p.add_argument("--validate", nargs="+", metavar="RESULTS.json",
                   help="predict every recorded netns run of these bench results")
    p.add_argument("--compute-profile-for", metavar="RECORDS=FILE", action="append",
                   default=[], help="--validate on budgeted records: the calibration taken "
                   "beside the runs of RECORDS (a results file given to --validate), for its "
                   "records that carry none (repeat it for several files)")
    p.add_argument("--shared-host", action="store_true",
                   help="all tasks share this host's cores (the simulated netns cluster)")
    p.add_argument("--device-cpus", metavar="CPUS", help="--calibrate: measure on one device "
                   "of the budgeted simulated cluster of --devices N devices")
    p.add_argument("--fit-half", action="store_true",
                   help="--validate: fit the shared host's capacity on every other "
                   "record and report the errors on the held-out rest")
    p.add_argument("--overlap-from", metavar="FILE", nargs="+",
                   help="a calibration whose rings' measured overlaps (and gRPC's CPU on the "
                   "fabric) serve: with --validate, records whose calibrations predate them; "
                   "with --calibrate --model, this calibration (same budget)")
    p.add_argument("--overlap-ratios", type=positive_float, nargs="+", metavar="R",
                   help="--calibrate --device-cpus: the wire/CPU ratios of each ring's overlap")
    p.add_argument("--transfer-rates", nargs="+", metavar="RATE", default=(),
                   help="--calibrate --device-cpus --model: gRPC's CPU per byte on the "
                   "simulated fabric at these link rates too")
    p.add_argument("--step-model", choices=STEP_MODELS, default="steady",
                   help="--validate: the PS modes' step on devices past an epoch's first "
                   "cycles (steady), inside them (in-step), or the queueing network alone")
    return p


def _queue_workload(model: str, batch_size: int, image_size: int, num_classes: int):
    from lab.planner.device_workload import DeviceWorkload

    return DeviceWorkload.of(zoo_workload(model, batch_size, image_size, num_classes),
                             pipeline=False)


def _in_step_workload(model: str, batch_size: int, image_size: int, num_classes: int):
    from lab.planner.device_workload import DeviceWorkload

    return DeviceWorkload.of(zoo_workload(model, batch_size, image_size, num_classes),
                             in_step=True)


def _workload_for(args):
    return {"queue": _queue_workload, "in-step": _in_step_workload}.get(args.step_model,
                                                                        zoo_workload)


def _validate(args) -> str:
    from lab.planner import repeats, validate
    from lab.planner.host_calibration import HostCalibration

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
    cal = HostCalibration.load(args.compute_profile) if args.compute_profile else None
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

    from lab.planner.host_calibration import HostCalibration

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
        out[name] = HostCalibration.load(path)
    return out


def _validate_repeats(args, records: list[tuple[str, dict]]) -> str:
    """Budgeted records: each setting's median and noise band (lab.planner.repeats)."""
    import json
    import statistics

    from lab.planner import repeats, validate
    from lab.planner.host_calibration import HostCalibration

    by_file = _calibrations_by_file(args.compute_profile_for, {s for s, _ in records},
                                    args.validate)
    cal = HostCalibration.load(args.compute_profile) if args.compute_profile else None
    # each record's calibration where it carries none: its file's, else the one for all
    fallback = {id(r): by_file.get(s, cal) for s, r in records}
    missing = sum(1 for _, r in records if not r.get("calibration") and fallback[id(r)] is None)
    if missing:
        raise UsageError(f"--validate needs --compute-profile FILE: {missing} of the "
                         f"{len(records)} budgeted records carry no calibration of their own "
                         "(python -m ralp.bench --calibrate; or --compute-profile-for "
                         "RECORDS=FILE, the one taken beside a file's runs)")
    lent = [HostCalibration.load(path).host for path in args.overlap_from or ()]

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


def _work(args) -> str:
    """The lab's requests (a validation, a calibration with the simulated cluster's probes,
    a plan of the simulated cluster); a plan of ``--nodes`` as the user's command does it."""
    if args.validate:
        return _validate(args)
    if args.calibrate:
        from lab.planner.calibrate import calibrate

        return calibrate(args)
    if args.nodes:
        return user_work(args)
    from lab.planner.simulated_plan import recommend_cli

    return recommend_cli(args, zoo_workload)


def run(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """The command's work (through the user's command's runner)."""
    return run_command(argv, prog, parser=_parser, work=_work)


def main(prog: str = PROG) -> None:
    sys.exit(run(prog=prog))
