"""The figures of a run's measured steps: throughput and step time (with their spread over
rounds), bytes from the link counters, and the staleness a sync paradigm allowed.

Pure functions of step end times, counter readings and sync records, shared by the PS job
and the Horovod rank job; checked against numpy in ``tests/bench/test_measure.py``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from ralp.profiler.links import LinkBytes

PROGRESS_EVERY = 5  # measured steps between progress messages to the bench


def timing(end_times: list[float], start: float, steps: int, workers: int, batch: int) -> dict:
    """Throughput and step time over the measured steps, with their spread over windows.

    A window is one round: as many steps as workers, so each window is about one step time
    of a worker. Throughput is images of all workers per second; step time is the time a
    worker takes for one batch (``workers`` x wall time / steps). The spread is the windows'
    interquartile range: ``[q1, q3]`` of their spans, and the rates those spans make (None
    under two windows). It lies inside the windows' own range; a standard deviation of the
    windows' rates grew past the figure itself whenever one window was short (workers
    finishing at nearly one instant make a rate without bound).
    """
    wall = end_times[-1] - start
    bounds = [start, *end_times[workers - 1::workers]]
    spans = _quartiles([max(b - a, 1e-9) for a, b in zip(bounds, bounds[1:], strict=False)])
    return {
        "images_per_sec": steps * batch / wall,
        "images_per_sec_iqr": None if spans is None else [workers * batch / spans[1],
                                                          workers * batch / spans[0]],
        "step_time_s": workers * wall / steps,
        "step_time_iqr_s": spans,
    }


def link_figures(
    before: Mapping[str, LinkBytes] | None, after: Mapping[str, LinkBytes] | None, steps: int
) -> dict:
    """Measured bytes per worker batch on the worker links and on the PS links, and the
    link that carried most (``busiest_link_bytes``: both directions;
    ``busiest_link_one_way_bytes``: its busier direction), all over the counters' window."""
    if before is None or after is None:
        return {"bytes_per_step_measured": None, "ps_bytes_per_step_measured": None,
                "busiest_link": None, "busiest_link_bytes": None,
                "busiest_link_one_way_bytes": None, "links": None}
    delta = {
        task: LinkBytes(after[task].tx - before[task].tx, after[task].rx - before[task].rx)
        for task in after
    }
    workers = sum(d.total for t, d in delta.items() if t.startswith("worker:"))
    ps = sum(d.total for t, d in delta.items() if t.startswith("ps:"))
    busiest = max(delta, key=lambda t: delta[t].total)
    return {
        "bytes_per_step_measured": workers / steps,
        "ps_bytes_per_step_measured": ps / steps,
        "busiest_link": busiest,
        "busiest_link_bytes": delta[busiest].total,
        "busiest_link_one_way_bytes": max(delta[busiest].tx, delta[busiest].rx),
        "links": {t: {"tx": d.tx, "rx": d.rx} for t, d in sorted(delta.items())},
    }


def wire_figures(
    before: Mapping[str, LinkBytes] | None, after: Mapping[str, LinkBytes] | None
) -> dict:
    """The busiest single link direction over the measured window (``before`` and ``after``
    read at the measured steps' edges): its name (``"ps:0 rx"``) and its bytes.

    Every link is full duplex, each direction shaped to the link's rate on its own, so no
    direction can carry more than rate x window: its bytes at that rate are a wire time
    that cannot exceed the window, where both directions summed (or a window wider than
    the measured steps) could."""
    if before is None or after is None:
        return {"busiest_direction": None, "busiest_direction_bytes": None}
    loads = {f"{task} {side}": getattr(after[task], side) - getattr(before[task], side)
             for task in after for side in ("tx", "rx")}
    busiest = max(loads, key=loads.__getitem__)
    return {"busiest_direction": busiest, "busiest_direction_bytes": loads[busiest]}


def control_plane_figures(
    before: Mapping[str, LinkBytes], after: Mapping[str, LinkBytes], seconds: float
) -> dict:
    """Bytes per second each kind of link carried while every rank idled (both directions,
    mean over the kind's links): Horovod's background coordination, which runs every cycle
    whether or not a tensor is pending. Payload byte models leave it out; on a link whose
    payload per second is small it is most of what the counters see."""
    rates: dict[str, list[float]] = {"worker": [], "ps": []}
    for task in after:
        delta = (after[task].tx - before[task].tx) + (after[task].rx - before[task].rx)
        rates[task.split(":")[0]].append(delta / seconds)
    mean = {kind: (sum(r) / len(r) if r else None) for kind, r in rates.items()}
    return {"control_bytes_per_s": mean["worker"], "ps_control_bytes_per_s": mean["ps"]}


def sync_figures(history) -> dict:
    """Under a sync paradigm: the largest clock gap any step started at, and the time workers
    spent held (all workers, seconds)."""
    if not history.sync:
        return {"sync_max_gap": None, "sync_waiting_s": None}
    return {"sync_max_gap": max(r.max_gap for r in history.sync),
            "sync_waiting_s": sum(sum(r.waiting_s) for r in history.sync)}


def _quartiles(values: list[float]) -> list[float] | None:
    """``[q1, q3]`` of ``values`` (inclusive quartiles: within their min and max)."""
    if len(values) < 2:
        return None
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return [q1, q3]


def cpu_window(before, after) -> dict:
    """The device groups' CPU counters at the measured window's edges (``CpuSnapshot``s), as
    plain JSON for the record's producer; the launcher turns them into the ``cpu`` field."""
    if before is None or after is None:
        return {}
    return {"cpu_window": [before.to_dict(), after.to_dict()]}
