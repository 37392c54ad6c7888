"""Interleaved repeats: one setting measured in several rounds, summarised by its median and
min-max.

``python -m ralp.bench --repeat R`` runs the whole matrix R times, the order rotated each
round, so that a drifting machine slows every setting alike. Each record keeps its ``round``;
here the records of one setting (every spec field but the round) become one summary row:
the median throughput with its min and max over the rounds, and each ratio (``vs PS``,
``vs hvd``) as the median of the per-round ratios, not the ratio of medians. Pure functions
of records: no TensorFlow, no matplotlib.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from ralp.bench.records import SPEC_KEYS, succeeded

# What one setting's summary carries of its rounds: (field, summary) pairs.
SPREAD_FIELDS = ("images_per_sec", "speedup_vs_ps", "speedup_vs_horovod")
MEDIAN_FIELDS = ("step_time_s", "bytes_per_step_measured", "bytes_per_step_predicted",
                 "bytes_ratio", "compute_step_time_s", "wire_step_time_s", "cpu_step_time_s",
                 "bound_step_time_s",
                 "bound_ratio", "device_pace", "dilation", "host_images_per_sec",
                 "host_step_time_s")


def setting_key(r: dict) -> tuple:
    """What makes two records the same setting: every spec field, and the mode auto chose."""
    return (*(r.get(k) for k in SPEC_KEYS), bool(r.get("auto")), r.get("scenario"))


def repeated(records: Sequence[dict]) -> bool:
    """Whether some setting has more than one record (rounds to summarise)."""
    keys = [setting_key(r) for r in records]
    return len(set(keys)) < len(keys)


def spread(values: Sequence[float]) -> dict | None:
    """Median, min and max of ``values``, and the largest deviation from the median as a
    share of it (None for no values)."""
    if not values:
        return None
    mid = median(values)
    worst = max(abs(v - mid) for v in values) / mid if mid else None
    return {"median": mid, "min": min(values), "max": max(values), "max_deviation": worst}


def summarize(records: Sequence[dict]) -> list[dict]:
    """One summary per setting, in order of first appearance: the first record's fields,
    ``rounds`` and ``failed`` counts, ``flagged`` (rounds whose host could not keep up),
    ``pace_moved`` (rounds whose pace did not hold, :func:`ralp.bench.pace.held_fields`),
    ``busy_beside`` (rounds with other work on the host, :func:`ralp.emulation.budget.fidelity`), each
    of :data:`SPREAD_FIELDS` as its median with ``<field>_spread`` (:func:`spread`) and each
    of :data:`MEDIAN_FIELDS` as its median. Speedups must be filled first (per round)."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault(setting_key(r), []).append(r)
    out = []
    for rows in groups.values():
        ok = [r for r in rows if succeeded(r)]
        summary = dict(rows[0])
        summary.update(rounds=len(rows), failed=len(rows) - len(ok),
                       flagged=sum(1 for r in ok if r.get("host_kept_up") is False),
                       pace_moved=sum(1 for r in ok if r.get("pace_held") is False),
                       busy_beside=sum(1 for r in ok if (r.get("cpu") or {}).get("busy_beside")),
                       error=None if ok else rows[0].get("error"))
        for field in SPREAD_FIELDS:
            values = [r[field] for r in ok if r.get(field) is not None]
            summary[f"{field}_spread"] = spread(values)
            summary[field] = median(values) if values else None
        for field in MEDIAN_FIELDS:
            values = [r[field] for r in ok if r.get(field) is not None]
            summary[field] = median(values) if values else None
        summary["images_per_sec_iqr"] = summary["step_time_iqr_s"] = None
        out.append(summary)
    return out


def numbered_as_rounds(records: Sequence[dict]) -> list[dict]:
    """Copies of ``records`` with each setting's k-th record (in the order given) as its round
    k: runs of one matrix made apart (one bench invocation per round, interleaved by hand)
    read as the rounds of one ``--repeat`` run."""
    seen: dict[tuple, int] = {}
    out = []
    for r in records:
        key = setting_key(r)
        out.append({**r, "round": seen.get(key, 0)})
        seen[key] = seen.get(key, 0) + 1
    return out
