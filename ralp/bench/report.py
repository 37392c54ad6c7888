"""Reporting ``python -m ralp.bench`` results: a text table, JSON, CSV, a figure.

A run is one record (a plain dict, keys in :data:`RECORD_KEYS` order) per (model, mode, devices).
This module only formats records; :func:`add_speedups` is its one computation.

``import ralp.bench.report`` stays cheap (no TensorFlow; matplotlib only inside :func:`plot`),
so re-rendering saved JSON is quick.
"""

from __future__ import annotations

import csv as csv_module
import io
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from statistics import fmean

from ralp._text import human_bytes, text_grid

RECORD_KEYS: tuple[str, ...] = (
    "model", "mode", "devices", "workers", "ps", "backend", "bandwidth", "job",
    "batch_size", "image_size", "num_classes", "data", "sync", "slow_worker", "steps", "warmup",
    "images_per_sec", "images_per_sec_std", "step_time_s", "step_time_std_s",
    "bytes_per_step_measured", "bytes_per_step_predicted", "bytes_ratio",
    "ps_bytes_per_step_measured", "ps_bytes_per_step_predicted",
    "compute_step_time_s", "network_step_time_s", "bound_ratio", "sync_max_gap", "sync_waiting_s",
    "speedup_vs_ps", "speedup_vs_horovod", "error",
)  # fmt: skip

MODE_ORDER = ("ps", "ralp-h", "ralp-n", "horovod")
MODE_COLORS = {"ps": "#8c8c8c", "ralp-h": "#1f77b4", "ralp-n": "#ff7f0e", "horovod": "#2ca02c"}
BASELINE_MODE = "ps"
# Fields a record must share with a plain-PS record to be compared with it: the same workload
# on the same network. ``_consolidated`` keeps jobs that shared a cluster apart from solo runs.
SPEEDUP_KEY = ("model", "devices", "num_classes", "image_size", "data", "backend", "bandwidth",
               "slow_worker")  # fmt: skip
MAX_WIDTH = 120


# --------------------------------------------------------------------------- speedups


def _speedup_key(r: dict) -> tuple:
    return (*(r.get(k) for k in SPEEDUP_KEY), _consolidated(r))


def _consolidated(r: dict) -> bool:
    return r.get("job") is not None


def _ok(r: dict) -> bool:
    return not r.get("error") and r.get("images_per_sec") is not None


def add_speedups(records: list[dict]) -> list[dict]:
    """Fill ``speedup_vs_ps`` and ``speedup_vs_horovod`` in place (and return ``records``).

    The reference is the first successful ``ps`` (``horovod``) record with the same
    :data:`SPEEDUP_KEY` (solo runs and consolidation jobs are never mixed); None where there
    is none, or for a failed record.
    """
    for mode, field in ((BASELINE_MODE, "speedup_vs_ps"), ("horovod", "speedup_vs_horovod")):
        baseline: dict[tuple, float] = {}
        for r in records:
            if r.get("mode") == mode and _ok(r) and r["images_per_sec"] > 0:
                baseline.setdefault(_speedup_key(r), r["images_per_sec"])
        for r in records:
            ref = baseline.get(_speedup_key(r))
            r[field] = r["images_per_sec"] / ref if ref and _ok(r) else None
    return records


# --------------------------------------------------------------------------- text


def _num(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _mean_std(mean: float | None, std: float | None, spec: str) -> str:
    if mean is None:
        return "-"
    return format(mean, spec) if std is None else f"{mean:{spec}} ± {std:{spec}}"


def _bytes(n: float | None) -> str:

    return "-" if n is None else human_bytes(n)


def _bound(r: dict) -> str:
    """Which side dominates a step (from its compute and network times when both are known)."""
    compute, network = r.get("compute_step_time_s"), r.get("network_step_time_s")
    ratio = r.get("bound_ratio")
    if compute is None or network is None:
        return _num(ratio, ".2f")
    side = "network" if network > compute else "compute"
    return side if ratio is None else f"{side} {ratio:.2f}"


def _mode_cell(r: dict) -> str:
    mode = f"{r['mode']} {r['sync']}" if r.get("sync") else r["mode"]
    return mode if r.get("job") is None else f"{mode} j{r['job']}"


TABLE_HEADER = ["model", "N", "mode", "W+PS", "img/s", "vs PS", "step s", "B/step meas",
                "B/step pred", "meas/pred", "bound"]  # fmt: skip
HOROVOD_COLUMN = 6  # "vs hvd" goes after "vs PS" when some record ran Horovod
_ID_COLUMNS = 4  # model, N, mode, W+PS: the cells a failed run still has
_RIGHT = {1, 3, 4, 5, 6, 7, 8, 9, 10}  # numeric columns, right-aligned even when some are "-"


def _id_cells(r: dict) -> list[str]:
    return [str(r.get("model")), str(r.get("devices")), _mode_cell(r),
            f"{r.get('workers')}+{r.get('ps')}"]  # fmt: skip


def _table_row(r: dict, with_horovod: bool = False) -> list[str]:
    row = [
        *_id_cells(r),
        _mean_std(r.get("images_per_sec"), r.get("images_per_sec_std"), ".1f"),
        _num(r.get("speedup_vs_ps"), ".2f"),
        _mean_std(r.get("step_time_s"), r.get("step_time_std_s"), ".3f"),
        _bytes(r.get("bytes_per_step_measured")),
        _bytes(r.get("bytes_per_step_predicted")),
        _num(r.get("bytes_ratio"), ".3f"),
        _bound(r),
    ]
    if with_horovod:
        row.insert(HOROVOD_COLUMN, _num(r.get("speedup_vs_horovod"), ".2f"))
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
    if r.get("scenario"):
        label += f"  scenario {r['scenario']}"
    return label


def _group_key(r: dict) -> tuple:
    return r.get("model"), r.get("backend"), r.get("bandwidth"), r.get("scenario")


def _error_line(id_cells: list[str], message: str, width: int) -> str:
    first_line = message.strip().splitlines()[0] if message.strip() else "failed"
    line = "  ".join([*id_cells, f"error: {first_line}"])
    return line if len(line) <= width else line[: width - 3] + "..."


def to_table(records: Sequence[dict]) -> str:
    """One row per record in the given order, a labelled rule where (model, network) changes."""

    if not records:
        return "(no records)"
    with_horovod = any(r.get("mode") == "horovod" for r in records)
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
    out, last = grid[:2], None
    for row, r in zip(body, records, strict=True):
        if _group_key(r) != last:
            out.append(f"---- {_group_label(r)} ".ljust(rule_width, "-"))
            last = _group_key(r)
        if r.get("error"):
            out.append(_error_line(row[:_ID_COLUMNS], str(r["error"]), max(rule_width, MAX_WIDTH)))
        else:
            out.append(next(ok_lines))
    return "\n".join(out)


# --------------------------------------------------------------------------- JSON, CSV


def to_json(records: Sequence[dict]) -> str:
    return json.dumps(list(records), indent=2)


def _csv_columns(records: Iterable[dict]) -> list[str]:
    """The schema's keys in order, then any others (``scenario``) as they first appear."""
    columns = list(RECORD_KEYS)
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


# --------------------------------------------------------------------------- figure


def _modes(records: Iterable[dict]) -> list[str]:
    seen = list(dict.fromkeys(r["mode"] for r in records))
    return [m for m in MODE_ORDER if m in seen] + [m for m in seen if m not in MODE_ORDER]


def _plot_groups(records: Sequence[dict]) -> list[tuple]:
    """The x positions: (model, devices, bandwidth), models in order of appearance, then N."""
    first = {m: k for k, m in enumerate(dict.fromkeys(r["model"] for r in records))}
    bandwidths = list(dict.fromkeys(r.get("bandwidth") for r in records))
    keys = {_bar_key(r) for r in records}
    return sorted(keys, key=lambda k: (first[k[0]], k[1], bandwidths.index(k[2])))


def _group_positions(groups: list[tuple]) -> list[float]:
    """x of each group: one apart, plus a half gap where the model changes, to set models off."""
    positions, x = [], 0.0
    for k, key in enumerate(groups):
        if k:
            x += 1.0 if key[0] == groups[k - 1][0] else 1.5
        positions.append(x)
    return positions


def _group_tick(key: tuple, show_bandwidth: bool) -> str:
    model, devices, bandwidth = key
    return f"{model}\nN={devices}" + (f"\n{bandwidth or 'unshaped'}" if show_bandwidth else "")


def _mean_of(records: Iterable[dict], field: str) -> float | None:
    values = [r[field] for r in records if r.get(field) is not None]
    return fmean(values) if values else None


def _bar_key(r: dict) -> tuple:
    return r["model"], r["devices"], r.get("bandwidth")


def _cells(records: Sequence[dict]) -> dict[tuple, list[dict]]:
    """(group, mode) -> the records of that bar; repeats are averaged when plotted."""
    cells: dict[tuple, list[dict]] = {}
    for r in records:
        cells.setdefault((_bar_key(r), r["mode"]), []).append(r)
    return cells


def _figure_title(records: Sequence[dict]) -> str:
    backends = ", ".join(dict.fromkeys(str(r.get("backend")) for r in records))
    bandwidths = list(dict.fromkeys(r.get("bandwidth") or "unshaped" for r in records))
    label = "bandwidth" if len(bandwidths) == 1 else "bandwidths"
    return f"ralp bench: backend {backends}, {label} {', '.join(bandwidths)}"


def _bar_offsets(n: int) -> tuple[float, list[float]]:
    width = 0.8 / max(1, n)
    return width, [(k - (n - 1) / 2) * width for k in range(n)]


def _draw_speedups(ax, groups, positions, modes, cells, colors) -> None:
    width, offsets = _bar_offsets(len(modes))
    for mode, dx in zip(modes, offsets, strict=True):
        xs, ys = [], []
        for x, key in zip(positions, groups, strict=True):
            value = _mean_of(cells.get((key, mode), []), "speedup_vs_ps")
            if value is not None:
                xs.append(x + dx)
                ys.append(value)
        bars = ax.bar(xs, ys, width, color=colors[mode], edgecolor="black", linewidth=0.4)
        if mode != BASELINE_MODE:  # its bars are 1.00 by definition; labels would crowd
            ax.bar_label(bars, labels=[f"{y:.2f}" for y in ys], fontsize=7, padding=1)
    for x, key in zip(positions, groups, strict=True):
        if not any(_mean_of(cells.get((key, m), []), "speedup_vs_ps") for m in modes):
            ax.text(x, 1.02, "no ps run", ha="center", va="bottom", fontsize=8, color="dimgray")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
    ax.set_ylabel("images/s relative to plain PS")
    ax.set_title("(a) throughput vs plain PS")
    ax.margins(y=0.12)  # room for the bar labels


def _mark_failed(ax, groups, positions, modes, failed: Sequence[dict]) -> None:
    """A red "failed" where a bar would be, so a missing bar is not read as a zero."""
    width, offsets = _bar_offsets(len(modes))
    slots = {(_bar_key(r), r["mode"]) for r in failed}
    for x, key in zip(positions, groups, strict=True):
        for mode, dx in zip(modes, offsets, strict=True):
            if (key, mode) in slots:
                ax.text(x + dx, 0.02, "failed", transform=ax.get_xaxis_transform(), rotation=90,
                        ha="center", va="bottom", fontsize=7, color="firebrick")  # fmt: skip


def _bytes_source(cells_of_bar: list[dict]) -> tuple[float | None, bool]:
    """Measured bytes where any repeat measured them, else predicted; and which it is."""
    measured = _mean_of(cells_of_bar, "bytes_per_step_measured")
    if measured is not None:
        return measured, True
    return _mean_of(cells_of_bar, "bytes_per_step_predicted"), False


def _draw_bytes(ax, groups, positions, modes, cells, colors) -> tuple[bool, bool]:
    """Bars of bytes per step; returns whether any bar was measured and any was predicted."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    width, offsets = _bar_offsets(len(modes))
    any_measured = any_predicted = False
    drawn: list[float] = []
    for mode, dx in zip(modes, offsets, strict=True):
        for x, key in zip(positions, groups, strict=True):
            bar = cells.get((key, mode), [])
            value, measured = _bytes_source(bar)
            if value is None or value <= 0:  # nothing to draw on a log axis
                continue
            any_measured |= measured
            any_predicted |= not measured
            drawn.append(value)
            ax.bar(x + dx, value, width, color=colors[mode], edgecolor="black", linewidth=0.4,
                   hatch=None if measured else "///")  # fmt: skip
            predicted = _mean_of(bar, "bytes_per_step_predicted")
            if measured and predicted:  # the model's figure, to read meas/pred at a glance
                ax.plot([x + dx - width / 2, x + dx + width / 2], [predicted] * 2,
                        color="black", linewidth=1.5)  # fmt: skip
    ax.set_yscale("log")
    if drawn:  # bars on a log axis start at its bottom: keep it well below the shortest bar
        ax.set_ylim(min(drawn) / 4, max(drawn) * 2)
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 1-2-5: labels every panel
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: human_bytes(y)))
    ax.yaxis.set_minor_formatter(NullFormatter())  # else a short range gets "4x10^8" labels
    ax.set_ylabel("bytes per step (all worker links)")
    source = {(True, False): "measured", (False, True): "predicted (none measured)",
              (True, True): "measured; hatched: predicted"}.get((any_measured, any_predicted), "")  # fmt: skip
    ax.set_title(f"(b) bytes per step: {source}" if source else "(b) bytes per step")
    return any_measured, any_predicted


def _plot_rows(records: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    """The successful records to draw (copies, speedups filled) and the failed ones to mark.

    Consolidation jobs are left out unless there is nothing else: jobs that shared a cluster
    are not comparable with solo runs.
    """
    ok = [dict(r) for r in records if _ok(r)]  # copies: the caller's records stay as they were
    consolidated = bool(ok) and all(_consolidated(r) for r in ok)
    rows = add_speedups([r for r in ok if _consolidated(r) == consolidated])
    failed = [r for r in records if not _ok(r) and _consolidated(r) == consolidated]
    return rows, failed if rows else []


def plot(records: Sequence[dict], path: str) -> None:
    """Two panels: (a) throughput relative to plain PS, (b) bytes per step (log scale).

    Bars are grouped by (model, N[, bandwidth]), one colour per mode; failed runs are marked.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, and no GUI toolkit to import
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows, failed = _plot_rows(records)
    groups, modes = _plot_groups([*rows, *failed]), _modes([*rows, *failed])
    cells = _cells(rows)
    palette = iter(plt.get_cmap("tab10").colors[4:])
    colors = {m: MODE_COLORS.get(m) or next(palette) for m in modes}

    # Each panel gets about a fifth of an inch per bar plus a gap per group, within reason.
    panel_width = 1.0 + len(groups) * (0.22 * len(modes) + 0.3)
    fig, (ax_a, ax_b) = plt.subplots(
        1, 2, figsize=(min(20.0, max(11.0, 2 * panel_width)), 5.2), layout="constrained"
    )
    fig.suptitle(_figure_title(rows) if rows else "ralp bench: no successful runs")
    if not rows:
        for ax in (ax_a, ax_b):
            ax.text(0.5, 0.5, "no successful runs", ha="center", va="center")
            ax.set_axis_off()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return
    show_bandwidth = len({k[2] for k in groups}) > 1
    ticks = [_group_tick(k, show_bandwidth) for k in groups]
    positions = _group_positions(groups)
    _draw_speedups(ax_a, groups, positions, modes, cells, colors)
    measured, predicted = _draw_bytes(ax_b, groups, positions, modes, cells, colors)
    for ax in (ax_a, ax_b):
        _mark_failed(ax, groups, positions, modes, failed)
    for ax in (ax_a, ax_b):
        ax.set_xticks(positions, ticks, fontsize=8)
        pad = max(0.6, 1.5 - (positions[-1] - positions[0]) / 2)  # a lone group: narrower bars
        ax.set_xlim(positions[0] - pad, positions[-1] + pad)
        ax.grid(axis="y", linewidth=0.3, alpha=0.6)

    handles = [Patch(facecolor=colors[m], edgecolor="black", linewidth=0.4, label=m) for m in modes]
    if measured and predicted:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                             label="predicted (not measured)"))  # fmt: skip
    if measured:
        handles.append(Line2D([], [], color="black", linewidth=1.5, label="predicted bytes"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------- outputs

_plot = plot  # write_outputs() has a parameter named ``plot``


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


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
        Path(plot).parent.mkdir(parents=True, exist_ok=True)
        _plot(records, plot)
        written.append(str(plot))
    return written


# --------------------------------------------------------------------------- consolidation


def _scenario_summary(jobs: list[dict], reference_total: float | None) -> str:
    ok = [r for r in jobs if _ok(r)]
    total = sum(r["images_per_sec"] for r in ok)
    per_model = {m: fmean(r["images_per_sec"] for r in ok if r["model"] == m)
                 for m in dict.fromkeys(r["model"] for r in ok)}  # fmt: skip
    means = ", ".join(f"{m} {v:.1f}" for m, v in per_model.items()) or "-"
    line = f"total {total:.1f} img/s   mean per model: {means}"
    if reference_total:
        line += f"   ({total / reference_total:.2f}x all-ps)"
    failed = len(jobs) - len(ok)
    return line + (f"   ({failed} failed)" if failed else "")


def _job_row(r: dict) -> list[str]:
    if r.get("error"):
        first = str(r["error"]).strip().splitlines()
        rate = f"error: {first[0] if first else 'failed'}"
    else:
        rate = _mean_std(r.get("images_per_sec"), r.get("images_per_sec_std"), ".1f")
    return [str(r["job"]), str(r.get("model")), str(r.get("mode")), rate]


def consolidation_table(records: Sequence[dict]) -> str:
    """Per scenario: one line per job, then its total and per-model mean throughput.

    Consolidation records are those with a ``job``; they carry a ``scenario`` name. Totals
    count successful jobs only; an ``all-ps`` scenario, when present, is the reference.
    """

    scenarios: dict[str, list[dict]] = {}
    for r in records:
        if _consolidated(r):
            scenarios.setdefault(str(r.get("scenario") or "-"), []).append(r)
    if not scenarios:
        return "(no consolidation records)"
    reference = scenarios.get("all-ps")
    reference_total = sum(r["images_per_sec"] for r in reference if _ok(r)) if reference else None
    out: list[str] = []
    for name, jobs in scenarios.items():
        jobs = sorted(jobs, key=lambda r: r["job"])
        out += [f"scenario {name}"]
        body = [_job_row(r) for r in jobs]
        out += ["  " + line for line in text_grid(["job", "model", "mode", "img/s"], body)]
        ref = reference_total if name != "all-ps" else None
        out += ["  " + _scenario_summary(jobs, ref), ""]
    return "\n".join(out).rstrip()
