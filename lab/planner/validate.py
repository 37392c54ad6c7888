"""Predictions against recorded bench runs (netns backend, solo jobs), with their errors.

The one constant that may be fitted, the shared host's capacity
(:attr:`lab.planner.ps_step.Host.capacity`), is never fitted on the records it is judged on:
:func:`split_half_fit` fits it on every other record (in a fixed order) and reports the errors
on the rest.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from lab.planner.host import Host, with_overlaps
from lab.planner.host_calibration import HostCalibration
from lab.planner.predict import predict_on
from ralp.planner.modes import PREDICTED_MODES, PlannerError
from ralp.planner.workload import Workload
from ralp.units import parse_bandwidth

# Candidate shared-host capacities (single-process steps run side by side): 0.5 .. 4.
CAPACITY_GRID: tuple[float, ...] = tuple(0.5 + k / 20 for k in range(71))


@dataclass(frozen=True)
class Row:
    source: str
    model: str
    mode: str
    devices: int
    bandwidth: str
    batch_size: int
    image_size: int
    predicted_images_per_sec: float
    measured_images_per_sec: float
    own_calibration: bool = False  # predicted from the calibration the record carries

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted_images_per_sec / self.measured_images_per_sec - 1


def load_records(paths: Sequence[str]) -> list[tuple[str, dict]]:
    """Successful solo netns records of ``paths`` (bench JSON lists), in file order."""
    out = []
    for path in paths:
        try:
            records = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise PlannerError(f"cannot read bench results {path!r}: {e}") from None
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise PlannerError(f"{path!r} is not a list of bench records (a results JSON)")
        for r in records:
            if (r.get("backend") == "netns" and r.get("job") is None and not r.get("error")
                    and r.get("images_per_sec") and r.get("mode") in PREDICTED_MODES):
                out.append((Path(path).name, r))
    return out


WorkloadFor = Callable[[str, int, int, int], Workload]  # model, batch, image, classes


def own_calibration(record: dict) -> HostCalibration | None:
    """The calibration a record carries (``python -m ralp.bench --calibrate`` measures each
    workload just before its runs), or None."""
    data = record.get("calibration")
    if not data:
        return None
    try:
        return HostCalibration.from_dict(data)
    except (ValueError, KeyError, TypeError) as e:
        raise PlannerError(f"a {record.get('model')} {record.get('mode')} record's calibration "
                           f"cannot be read ({e})") from None


def predict_records(records: Iterable[tuple[str, dict]], calibration: HostCalibration | None,
                    workload_for: WorkloadFor, capacity: float | None = None,
                    overlaps: Host | None = None) -> list[Row]:
    """Each record predicted with its workload's calibration (its host capacity included),
    or with ``capacity`` for every record (a fitted capacity replaces the measured ones). A
    record that carries its own calibration (taken beside it) is predicted from that one;
    ``calibration`` serves the others. ``overlaps``: a host whose rings' overlaps (measured
    apart: :mod:`lab.planner.ring_overlap`) serve budgeted calibrations taken before they
    were measured, and whose curves (several wire / CPU ratios) fill those that have only a
    figure (:func:`lab.planner.host.with_overlaps`; the model prefers a curve)."""
    rows = []
    for source, r in records:
        cal = own_calibration(r) or calibration
        if cal is None:
            raise PlannerError(f"{source}: the {r['model']} {r['mode']} N={r['devices']} record "
                               "carries no calibration; give --compute-profile FILE")
        key = (r["model"], r["batch_size"], r["image_size"], r["num_classes"])
        entry = cal.find(*key)
        on = entry.host_for(cal.host)
        if capacity is not None:  # one fitted figure for every process count
            on = replace(on, capacity=capacity, capacities=())
        on = _host_terms(on, overlaps, source, r)
        # on the shape it ran (the mode's resources, or --workers/--ps given by hand), on the
        # link it ran on; a dilated run's prediction in the reference device's time, as its
        # images/s (ralp.bench.pace): its calibration is the host's, its link the applied one
        link = r.get("applied_bandwidth") or r["bandwidth"]
        p = predict_on(workload_for(*key), entry.compute, on, r["mode"], r["workers"], r["ps"],
                       parse_bandwidth(link), r["devices"])
        rows.append(Row(source, r["model"], r["mode"], r["devices"], r["bandwidth"],
                        r["batch_size"], r["image_size"],
                        p.images_per_sec * (r.get("dilation") or 1.0),
                        r["images_per_sec"], cal is not calibration))
    return rows


def compute_only(host: Host) -> bool:
    """Whether ``host`` is the product's calibration (``python -m ralp.planner --calibrate``,
    which the bench takes by default): a device's compute, none of the host's byte or ring
    terms."""
    return (not host.shared and host.device_cpus is None and not host.cpu_s_per_byte
            and host.ring_cpu_s_per_byte is None)


def _host_terms(on: Host, overlaps: Host | None, source: str, record: dict) -> Host:
    """The host a budgeted record is predicted on: its calibration's, with the rings' and
    transfers' terms ``overlaps`` lends where that one lacks them; a compute-only calibration
    takes all of the lent host's terms, and without one it is refused (its transfers would
    cost no CPU: every prediction too fast)."""
    if compute_only(on):
        if overlaps is None:
            raise PlannerError(
                f"{source + ': ' if source else ''}the {record['model']} {record['mode']} record carries the "
                "product's calibration, a device's compute only: give --overlap-from FILE, a "
                "lab calibration of its budget (python -m lab.planner --calibrate), for the "
                "host's byte and ring terms")
        return replace(overlaps, capacity=on.capacity, capacities=on.capacities)
    return with_overlaps(on, overlaps) if overlaps is not None and on.device_cpus else on


def lent_for(record: dict, lent: Sequence[Host]) -> Host | None:
    """Of the calibrations ``--overlap-from`` lends, the one measured on ``record``'s budget
    (its own calibration's device CPUs), else the first; None where none is lent."""
    own = (record.get("calibration") or {}).get("host", {}).get("device_cpus")
    return next((host for host in lent if host.device_cpus == own), lent[0] if lent else None)


def predict_record(record: dict, calibration: HostCalibration | None,
                   workload_for: WorkloadFor, overlaps: Host | None = None) -> float:
    """A record's predicted images/s: from the calibration it carries, else ``calibration``
    (``overlaps`` as :func:`predict_records` takes it)."""
    rows = predict_records([("", record)], calibration, workload_for, overlaps=overlaps)
    return rows[0].predicted_images_per_sec


def errors(rows: Sequence[Row]) -> dict:
    abs_err = [abs(row.error) for row in rows]
    return {"median_abs_error": statistics.median(abs_err) if abs_err else None,
            "max_abs_error": max(abs_err) if abs_err else None, "count": len(rows)}


def split_half_fit(records: list[tuple[str, dict]], calibration: HostCalibration | None,
                   workload_for: WorkloadFor,
                   grid: Sequence[float]) -> tuple[float, list[Row], list[Row]]:
    """Fit the shared host's ``capacity`` on the even-numbered records (median |error|, over
    ``grid``); return it with the rows of the fitting half and of the held-out half."""
    fit_half, held_out = records[0::2], records[1::2]

    def score(value: float) -> float:
        rows = predict_records(fit_half, calibration, workload_for, value)
        return errors(rows)["median_abs_error"]

    best = min(grid, key=score)
    return (best, predict_records(fit_half, calibration, workload_for, best),
            predict_records(held_out, calibration, workload_for, best))


def choices(rows: Sequence[Row]) -> list[dict]:
    """Per setting (model, N, bandwidth, batch, image) with two or more measured modes: the
    mode the planner would choose among them, the best measured one, and the chosen mode's
    measured throughput over the best's (a mode measured twice counts with its mean)."""
    settings: dict[tuple, dict[str, list[Row]]] = {}
    for r in rows:
        key = (r.model, r.devices, r.bandwidth, r.batch_size, r.image_size)
        settings.setdefault(key, {}).setdefault(r.mode, []).append(r)
    out = []
    for (model, devices, bandwidth, batch, image), modes in settings.items():
        if len(modes) < 2:
            continue
        measured = {m: statistics.fmean(r.measured_images_per_sec for r in rs)
                    for m, rs in modes.items()}
        predicted = {m: rs[0].predicted_images_per_sec for m, rs in modes.items()}
        chosen = max(predicted, key=predicted.get)
        best = max(measured, key=measured.get)
        out.append({"model": model, "devices": devices, "bandwidth": bandwidth,
                    "batch_size": batch, "image_size": image, "modes": sorted(modes),
                    "chosen": chosen, "best_measured": best,
                    "chosen_over_best": measured[chosen] / measured[best]})
    return out


def to_json(rows: Sequence[Row], **extra) -> str:
    records = [{**asdict(row), "error": row.error} for row in rows]
    return json.dumps({"records": records, **errors(rows), **extra,
                       "choices": choices(rows)}, indent=2)


def to_text(rows: Sequence[Row]) -> str:
    lines = [f"{'source':<26} {'model':<10} {'mode':<8} {'N':>3} {'bandwidth':>9} "
             f"{'predicted':>10} {'measured':>9} {'error':>7}"]
    for r in rows:
        lines.append(f"{r.source:<26} {r.model:<10} {r.mode:<8} {r.devices:>3} "
                     f"{r.bandwidth:>9} {r.predicted_images_per_sec:>10.2f} "
                     f"{r.measured_images_per_sec:>9.2f} {r.error:>+7.1%}"
                     + (" *" if r.own_calibration else ""))
    e = errors(rows)
    if rows:
        lines.append(f"{e['count']} records: median |error| {e['median_abs_error']:.1%}, "
                     f"max {e['max_abs_error']:.1%} (images/s, predicted/measured - 1)")
        if any(r.own_calibration for r in rows):
            lines.append("*: predicted from the calibration taken beside the run "
                         "(python -m ralp.bench --calibrate)")
    picks = choices(rows)
    if picks:
        lines.append("")
        lines.append(f"{'choice among measured modes':<36} {'chosen':<8} {'best':<8} "
                     "chosen/best (measured)")
        for c in picks:
            what = f"{c['model']} N={c['devices']} {c['bandwidth']} b{c['batch_size']}"
            lines.append(f"{what:<36} {c['chosen']:<8} {c['best_measured']:<8} "
                         f"{c['chosen_over_best']:.2f}")
    return "\n".join(lines)
