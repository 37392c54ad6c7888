"""Reporting ``python -m ralp.bench`` results: a text table, JSON, CSV, the consolidation table.

Records (:mod:`ralp.bench.records`) are only formatted here; the figure is
:mod:`ralp.bench.plots`. ``import ralp.bench.report`` stays cheap (no TensorFlow, no
matplotlib), so re-rendering saved JSON is quick.
"""

from __future__ import annotations

import csv as csv_module
import io
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from statistics import fmean

from ralp._text import human_bytes, text_grid
from ralp.bench.bound import bound_side
from ralp.bench.pace import PACE_TOLERANCE
from ralp.bench.records import (
    EXTRA_KEYS,
    RECORD_KEYS,
    consolidated,
    cpus_label,
    short_error,
    succeeded,
)
from ralp.bench.rounds import repeated, summarize
from ralp.emulation.budget import BUSY_BESIDE_CPUS
from ralp.modes import HOROVOD

MAX_WIDTH = 120


# --------------------------------------------------------------------------- text


def _num(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _with_iqr(value: float | None, iqr: list[float] | None, spec: str) -> str:
    """A figure with its windows' interquartile range (a record of an older bench, which
    kept a standard deviation instead, shows the figure alone)."""
    if value is None:
        return "-"
    return format(value, spec) if not iqr else f"{value:{spec}} [{iqr[0]:{spec}}-{iqr[1]:{spec}}]"


def _bytes(n: float | None) -> str:

    return "-" if n is None else human_bytes(n)


def _bound(r: dict) -> str:
    """The step over its bound, and which side the bound is: compute alone, the busiest
    link direction's wire time, or the busiest device's CPU time ("cpu ps:0"); records
    before the wire time carry no side: '-'."""
    ratio = r.get("bound_ratio")
    if ratio is None:
        return "-"
    side = bound_side(r)
    return f"{ratio:.2f}" if side is None else f"{ratio:.2f} {side}"


def _mode_cell(r: dict) -> str:
    mode = f"auto->{r['mode']}" if r.get("auto") else r["mode"]
    mode = f"{mode} {r['sync']}" if r.get("sync") else mode
    if r.get("pull_schedule") not in (None, "default"):
        mode += f" {r['pull_schedule']}"
    if _flagged(r):
        mode += " !"
    if r.get("failed"):
        mode += f" ({r['failed']}/{r['rounds']} failed)"
    return mode if r.get("job") is None else f"{mode} j{r['job']}"


def _flagged(r: dict) -> bool:
    """The host could not keep up with the devices' budgets, or its pace moved during the
    round (in some round of a summary)."""
    return (bool(r.get("flagged")) or bool(r.get("pace_moved")) or _busy_beside(r)
            or r.get("host_kept_up") is False or r.get("pace_held") is False)


def _busy_beside(r: dict) -> bool:
    """Other work ran on the host beside the run (in some round of a summary)."""
    return bool(r.get("busy_beside")) or bool((r.get("cpu") or {}).get("busy_beside"))


FLAG_NOTE = ("! the host could not keep up: the devices' budgets plus the CPU spent outside "
             "them reached its CPUs, so some device got less than its budget; read with care")
BUSY_NOTE = ("! the host was busy beside the run: more than "
             f"{BUSY_BESIDE_CPUS:g} CPU ran outside the devices' budgets, beyond what the run's "
             "own outside work takes, so the devices were likely slower than their budgets (and "
             "pace) say; read with care")
PACE_NOTE = ("! the host's pace moved during the round: probed again after its runs, a device's "
             "pace differed from the one its links were dilated by by more than "
             f"{PACE_TOLERANCE:.0%}; read with care")


def _with_spread(r: dict, field: str, spec: str) -> str:
    """A median with its min-max over rounds (a summary), else the value."""
    value, rounds = r.get(field), r.get(f"{field}_spread")
    if value is None:
        return "-"
    if not rounds or rounds["min"] == rounds["max"]:
        return format(value, spec)
    return f"{value:{spec}} [{rounds['min']:{spec}}-{rounds['max']:{spec}}]"


TABLE_HEADER = ["model", "N", "mode", "W+PS", "img/s", "vs PS", "step s", "B/step meas",
                "B/step pred", "meas/pred", "bound"]
HOROVOD_COLUMN = 6  # "vs hvd" goes after "vs PS" when some record ran Horovod
_ID_COLUMNS = 4  # model, N, mode, W+PS: the cells a failed run still has
_RIGHT = {1, 3, 4, 5, 6, 7, 8, 9, 10}  # numeric columns, right-aligned even when some are "-"


def _id_cells(r: dict) -> list[str]:
    return [str(r.get("model")), str(r.get("devices")), _mode_cell(r),
            f"{r.get('workers')}+{r.get('ps')}"]


def _table_row(r: dict, with_horovod: bool = False) -> list[str]:
    rate = (_with_spread(r, "images_per_sec", ".1f") if "rounds" in r
            else _with_iqr(r.get("images_per_sec"), r.get("images_per_sec_iqr"), ".1f"))
    row = [
        *_id_cells(r),
        rate,
        _with_spread(r, "speedup_vs_ps", ".2f"),
        _num(r.get("step_time_s"), ".3f"),
        _bytes(r.get("bytes_per_step_measured")),
        _bytes(r.get("bytes_per_step_predicted")),
        _num(r.get("bytes_ratio"), ".3f"),
        _bound(r),
    ]
    if with_horovod:
        row.insert(HOROVOD_COLUMN, _with_spread(r, "speedup_vs_horovod", ".2f"))
    return row


def _pad(rows: list[list[str]], right: set[int]) -> list[list[str]]:
    """Pad every column to one width, so ``text_grid`` keeps our alignment as it is."""
    widths = [max(len(row[k]) for row in rows if k < len(row)) for k in range(len(rows[0]))]
    return [
        [c.rjust(widths[k]) if k in right else c.ljust(widths[k]) for k, c in enumerate(row)]
        for row in rows
    ]


def _group_label(r: dict) -> str:
    label = f"{r.get('model')}  {r.get('backend')}"
    if r.get("bandwidth"):
        label += f" @ {r['bandwidth']}"
    if r.get("dilation"):
        label += f" {_dilation_cell(r)}"
    cpus = cpus_label(r)
    if cpus:
        label += f", {cpus}"
    if r.get("scenario"):
        label += f"  scenario {r['scenario']}"
    return label


def _dilation_cell(r: dict) -> str:
    """A dilated setting's applied link (one round's: each round has its own), dilation and
    the pace it came from."""
    applied = "" if r.get("rounds") else f"applied {r.get('applied_bandwidth')}, "
    pace = f", pace {r['device_pace']:.3g}" if r.get("device_pace") else ""
    return f"({applied}dilation {r['dilation']:.3g}{pace})"


def reference_line(records: Sequence[dict]) -> str | None:
    """The table's first line where its figures are in a reference device's time."""
    named = sorted({r["reference_device"] for r in records if r.get("reference_device")})
    if not named:
        return None
    return (f"reference device: {'; '.join(named)}. Dilated runs: links slowed by the "
            "dilation (1 / the host's pace), images/s and step times in the reference's time")


def _group_key(r: dict) -> tuple:
    return (r.get("model"), r.get("backend"), r.get("bandwidth"), r.get("device_cpus"),
            r.get("scenario"))


def _error_line(id_cells: list[str], message: str, width: int) -> str:
    line = "  ".join([*id_cells, f"error: {short_error(message)}"])
    return line if len(line) <= width else line[: width - 3] + "..."


def to_table(records: Sequence[dict]) -> str:
    """One row per record in the given order, a labelled rule where (model, network) changes."""

    if not records:
        return "(no records)"
    reference = reference_line(records)
    if repeated(records):
        records = summarize(records)
    with_horovod = any(r.get("mode") == HOROVOD for r in records)
    header = list(TABLE_HEADER)
    if with_horovod:
        header.insert(HOROVOD_COLUMN, "vs hvd")
    # Failed runs take part in the identity columns' widths, so their rows line up too.
    cells = [_table_row(r, with_horovod) if not r.get("error") else _id_cells(r) for r in records]
    padded = _pad([header, *cells], _RIGHT)
    header, body = padded[0], padded[1:]
    ok_rows = [row for row, r in zip(body, records, strict=True) if not r.get("error")]
    grid = text_grid(header, ok_rows)
    rule_width = len(grid[1])
    ok_lines = iter(grid[2:])
    out, last = ([reference] if reference else []) + grid[:2], None
    for row, r in zip(body, records, strict=True):
        if _group_key(r) != last:
            out.append(f"---- {_group_label(r)} ".ljust(rule_width, "-"))
            last = _group_key(r)
        if r.get("error"):
            out.append(_error_line(row[:_ID_COLUMNS], str(r["error"]), max(rule_width, MAX_WIDTH)))
        else:
            out.append(next(ok_lines))
    if any("rounds" in r for r in records):
        rounds = sorted({r["rounds"] for r in records})
        out.append(f"medians over {'/'.join(map(str, rounds))} rounds [min-max]; ratios: "
                   "median of the per-round ratios")
    if any(r.get("flagged") or r.get("host_kept_up") is False for r in records):
        out.append(FLAG_NOTE)
    if any(_busy_beside(r) for r in records):
        out.append(BUSY_NOTE)
    if any(r.get("pace_moved") or r.get("pace_held") is False for r in records):
        out.append(PACE_NOTE)
    return "\n".join(out)


# --------------------------------------------------------------------------- JSON, CSV


def to_json(records: Sequence[dict]) -> str:
    return json.dumps(list(records), indent=2)


def _csv_columns(records: Iterable[dict]) -> list[str]:
    """The schema's keys in order, then the known extras, then any others as they appear."""
    columns = list(RECORD_KEYS)
    seen = {k for r in records for k in r}
    columns += [k for k in EXTRA_KEYS if k in seen]
    for r in records:
        columns += [k for k in r if k not in columns]
    return columns


def to_csv(records: Sequence[dict]) -> str:
    columns = _csv_columns(records)
    out = io.StringIO()
    writer = csv_module.writer(out)
    writer.writerow(columns)
    for r in records:
        writer.writerow(["" if r.get(c) is None else r[c] for c in columns])
    return out.getvalue()


# --------------------------------------------------------------------------- outputs


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def check_outputs(*paths: str | None) -> None:
    """Refuse now, before any run, an output path that cannot be written (a directory, or a
    folder that cannot be made or written), saying which and why."""
    from ralp.bench.runspec import BenchError

    for path in (Path(p) for p in paths if p):
        if path.is_dir():
            raise BenchError(f"cannot write {str(path)!r}: it is a directory; give a file name")
        existed = path.exists()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a"):
                pass
        except OSError as e:
            raise BenchError(f"cannot write {str(path)!r}: {e.strerror or e}; choose another "
                             "path") from None
        if not existed:
            path.unlink()


def keep_records(records: Sequence[dict]) -> str:
    """Save ``records`` as JSON in a new file in the temporary folder; its path."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="ralp-bench-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(to_json(records))
    return path


def write_outputs(
    records: Sequence[dict], out: str | None, csv: str | None, plot: str | None
) -> list[str]:
    """Write JSON to ``out``, CSV to ``csv``, the figure to ``plot``; return the paths written.

    With ``out`` and no ``csv``, the CSV goes next to the JSON (same stem, ``.csv``), so one
    flag gives both the exact record and a spreadsheet-friendly copy.
    """
    written = []
    if out is not None:
        written.append(_write(Path(out), to_json(records)))
        implicit = Path(out).with_suffix(".csv")
        if csv is None and implicit != Path(out):
            csv = str(implicit)
    if csv is not None:
        written.append(_write(Path(csv), to_csv(records)))
    if plot is not None:
        from ralp.bench.plots import plot as draw

        Path(plot).parent.mkdir(parents=True, exist_ok=True)
        draw(records, plot)
        written.append(str(plot))
    return written


# --------------------------------------------------------------------------- consolidation


def _scenario_summary(jobs: list[dict], reference_total: float | None) -> str:
    ok = [r for r in jobs if succeeded(r)]
    total = sum(r["images_per_sec"] for r in ok)
    per_model = {m: fmean(r["images_per_sec"] for r in ok if r["model"] == m)
                 for m in dict.fromkeys(r["model"] for r in ok)}
    means = ", ".join(f"{m} {v:.1f}" for m, v in per_model.items()) or "-"
    line = f"total {total:.1f} img/s   mean per model: {means}"
    if reference_total:
        line += f"   ({total / reference_total:.2f}x all-ps)"
    failed = len(jobs) - len(ok)
    return line + (f"   ({failed} failed)" if failed else "")


def _job_row(r: dict) -> list[str]:
    if r.get("error"):
        rate = f"error: {short_error(r['error'])}"
    else:
        rate = _with_iqr(r.get("images_per_sec"), r.get("images_per_sec_iqr"), ".1f")
    return [str(r["job"]), str(r.get("model")), str(r.get("mode")), rate]


def consolidation_table(records: Sequence[dict]) -> str:
    """Per scenario: one line per job, then its total and per-model mean throughput.

    Consolidation records are those with a ``job``; they carry a ``scenario`` name. Totals
    count successful jobs only; an ``all-ps`` scenario, when present, is the reference.
    """

    scenarios: dict[str, list[dict]] = {}
    for r in records:
        if consolidated(r):
            scenarios.setdefault(str(r.get("scenario") or "-"), []).append(r)
    if not scenarios:
        return "(no consolidation records)"
    reference = scenarios.get("all-ps")
    reference_total = sum(r["images_per_sec"] for r in reference if succeeded(r)) if reference else None
    out: list[str] = []
    for name, jobs in scenarios.items():
        jobs = sorted(jobs, key=lambda r: r["job"])
        out += [f"scenario {name}"]
        body = [_job_row(r) for r in jobs]
        out += ["  " + line for line in text_grid(["job", "model", "mode", "img/s"], body)]
        ref = reference_total if name != "all-ps" else None
        out += ["  " + _scenario_summary(jobs, ref), ""]
    return "\n".join(out).rstrip()
