"""The bench's figure: throughput relative to plain PS, and bytes per step (log scale).

:func:`build_figure` makes a matplotlib ``Figure`` from records (tests read its bars and
labels); :func:`plot` saves it. matplotlib is imported only here, and only when called.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import median

from ralp import modes as registry
from ralp._text import human_bytes
from ralp.bench.records import BASELINE_MODE, add_speedups, consolidated, cpus_label, succeeded

MODE_ORDER = registry.PLOT_ORDER
MODE_COLORS = {name: registry.MODES[name].color for name in MODE_ORDER}


def _modes(records: Iterable[dict]) -> list[str]:
    seen = list(dict.fromkeys(r["mode"] for r in records))
    return [m for m in MODE_ORDER if m in seen] + [m for m in seen if m not in MODE_ORDER]


def _plot_groups(records: Sequence[dict]) -> list[tuple]:
    """The x positions: (model, devices, bandwidth, CPUs), models in order of appearance,
    then N, then bandwidths and CPU budgets in order of appearance."""
    first = {m: k for k, m in enumerate(dict.fromkeys(r["model"] for r in records))}
    bandwidths = list(dict.fromkeys(r.get("bandwidth") for r in records))
    budgets = list(dict.fromkeys(_cpus(r) for r in records))
    keys = {_bar_key(r) for r in records}
    return sorted(keys, key=lambda k: (first[k[0]], k[1], bandwidths.index(k[2]),
                                       budgets.index(k[3])))


def _cpus(r: dict) -> str:
    return cpus_label(r) or "-"


def _group_positions(groups: list[tuple]) -> list[float]:
    """x of each group: one apart, plus a half gap where the model changes, to set models off."""
    positions, x = [], 0.0
    for k, key in enumerate(groups):
        if k:
            x += 1.0 if key[0] == groups[k - 1][0] else 1.5
        positions.append(x)
    return positions


def _group_tick(key: tuple, show_bandwidth: bool, show_cpus: bool = False) -> str:
    model, devices, bandwidth, cpus = key
    tick = f"{model}\nN={devices}" + (f"\n{bandwidth or 'unshaped'}" if show_bandwidth else "")
    return tick + (f"\n{cpus.replace(' CPU/device', ' CPU')}" if show_cpus else "")


def _median_of(records: Iterable[dict], field: str) -> float | None:
    """The median over a bar's records (its rounds): the figure the table gives too."""
    values = [r[field] for r in records if r.get(field) is not None]
    return median(values) if values else None


def _range_of(records: Iterable[dict], field: str) -> tuple[float, float] | None:
    values = [r[field] for r in records if r.get(field) is not None]
    return (min(values), max(values)) if len(values) > 1 else None


def _bar_key(r: dict) -> tuple:
    return r["model"], r["devices"], r.get("bandwidth"), _cpus(r)


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
        xs, ys, spans = [], [], []
        for x, key in zip(positions, groups, strict=True):
            value = _median_of(cells.get((key, mode), []), "speedup_vs_ps")
            if value is not None:
                xs.append(x + dx)
                ys.append(value)
                spans.append(_range_of(cells.get((key, mode), []), "speedup_vs_ps") or (value, value))
        bars = ax.bar(xs, ys, width, color=colors[mode], edgecolor="black", linewidth=0.4)
        if any(lo != hi for lo, hi in spans):  # repeats: their min-max
            below = [y - lo for y, (lo, _) in zip(ys, spans, strict=True)]
            above = [hi - y for y, (_, hi) in zip(ys, spans, strict=True)]
            ax.errorbar(xs, ys, yerr=[below, above], fmt="none", ecolor="black",
                        elinewidth=0.8, capsize=2)
        if mode != BASELINE_MODE:  # its bars are 1.00 by definition; labels would crowd
            ax.bar_label(bars, labels=[f"{y:.2f}" for y in ys], fontsize=7, padding=1)
    for x, key in zip(positions, groups, strict=True):
        if not any(_median_of(cells.get((key, m), []), "speedup_vs_ps") for m in modes):
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
                        ha="center", va="bottom", fontsize=7, color="firebrick")


def _bytes_source(cells_of_bar: list[dict]) -> tuple[float | None, bool]:
    """Measured bytes where any repeat measured them, else predicted; and which it is."""
    measured = _median_of(cells_of_bar, "bytes_per_step_measured")
    if measured is not None:
        return measured, True
    return _median_of(cells_of_bar, "bytes_per_step_predicted"), False


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
                   hatch=None if measured else "///")
            predicted = _median_of(bar, "bytes_per_step_predicted")
            if measured and predicted:  # the model's figure, to read meas/pred at a glance
                ax.plot([x + dx - width / 2, x + dx + width / 2], [predicted] * 2,
                        color="black", linewidth=1.5)
    ax.set_yscale("log")
    if drawn:  # bars on a log axis start at its bottom: keep it well below the shortest bar
        ax.set_ylim(min(drawn) / 4, max(drawn) * 2)
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 1-2-5: labels every panel
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: human_bytes(y)))
    ax.yaxis.set_minor_formatter(NullFormatter())  # else a short range gets "4x10^8" labels
    ax.set_ylabel("bytes per step (all worker links)")
    source = {(True, False): "measured", (False, True): "predicted (none measured)",
              (True, True): "measured; hatched: predicted"}.get((any_measured, any_predicted), "")
    ax.set_title(f"(b) bytes per step: {source}" if source else "(b) bytes per step")
    return any_measured, any_predicted


def _plot_rows(records: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    """The successful records to draw (copies, speedups filled) and the failed ones to mark.

    Consolidation jobs are left out unless there is nothing else: jobs that shared a cluster
    are not comparable with solo runs.
    """
    ok = [dict(r) for r in records if succeeded(r)]  # copies: the caller's records stay as they were
    jobs_only = bool(ok) and all(consolidated(r) for r in ok)
    rows = add_speedups([r for r in ok if consolidated(r) == jobs_only])
    failed = [r for r in records if not succeeded(r) and consolidated(r) == jobs_only]
    return rows, failed if rows else []


def build_figure(records: Sequence[dict]):
    """Two panels: (a) throughput relative to plain PS, (b) bytes per step (log scale).

    Bars are grouped by (model, N[, bandwidth]), one colour per mode; failed runs are marked.
    Returns a ``matplotlib.figure.Figure`` (made without pyplot: no global state, no GUI).
    """
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows, failed = _plot_rows(records)
    groups, modes = _plot_groups([*rows, *failed]), _modes([*rows, *failed])
    cells = _cells(rows)
    palette = iter(matplotlib.colormaps["tab10"].colors[4:])
    colors = {m: MODE_COLORS.get(m) or next(palette) for m in modes}

    # Each panel gets about a fifth of an inch per bar plus a gap per group, within reason.
    panel_width = 1.0 + len(groups) * (0.22 * len(modes) + 0.3)
    fig = Figure(figsize=(min(20.0, max(11.0, 2 * panel_width)), 5.2), layout="constrained")
    ax_a, ax_b = fig.subplots(1, 2)
    fig.suptitle(_figure_title(rows) if rows else "ralp bench: no successful runs")
    if not rows:
        for ax in (ax_a, ax_b):
            ax.text(0.5, 0.5, "no successful runs", ha="center", va="center")
            ax.set_axis_off()
        return fig
    show_bandwidth = len({k[2] for k in groups}) > 1
    show_cpus = len({k[3] for k in groups}) > 1
    ticks = [_group_tick(k, show_bandwidth, show_cpus) for k in groups]
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
                             label="predicted (not measured)"))
    if measured:
        handles.append(Line2D([], [], color="black", linewidth=1.5, label="predicted bytes"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8)
    return fig


def plot(records: Sequence[dict], path: str) -> None:
    """Save :func:`build_figure` of ``records`` as a PNG at ``path``."""
    build_figure(records).savefig(path, dpi=120)
