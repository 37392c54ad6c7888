"""Every bench record against its bound: the longer of its compute alone and its wire time.

A run's compute alone comes from its workload's calibration (:mod:`ralp.bench.calibrated`:
one device's step times inside its budget, measured just before the run), through the
planner's step formula with every link infinitely fast
(:func:`ralp.planner.topology.compute_step_s`); its wire time is the busiest link
direction's bytes at the link's rate (:func:`ralp.bench.records.derived_figures`). A step
can be no shorter than either, so ``bound_ratio`` = step / bound says how far a run is
from what its compute and its network allow.
"""

from __future__ import annotations

from collections.abc import Mapping

from ralp.errors import RalpError


def compute_step_s(record: Mapping) -> float | None:
    """The step of ``record``'s mode on its workers and PS tasks with the calibrated
    compute alone; None without a calibration of its workload."""
    from ralp.planner.calibration import Calibration
    from ralp.planner.topology import compute_step_s as formula

    if not record.get("calibration"):
        return None
    try:
        entry = Calibration.from_dict(record["calibration"]).find(
            record["model"], record["batch_size"], record["image_size"], record["num_classes"])
    except (RalpError, TypeError, ValueError):
        return None  # a calibration of another workload, or unreadable: no compute bound
    return formula(entry.compute, record["mode"], record["workers"], record["ps"],
                   "bsp" if record.get("sync") == "bsp" else "async")


def bound_figures(record: Mapping) -> dict:
    """``compute_step_time_s``, ``bound_step_time_s`` (the longer of it and
    ``wire_step_time_s``) and ``bound_ratio`` (step time / bound) of a successful record;
    None where neither side is known."""
    out = {"compute_step_time_s": None, "bound_step_time_s": None, "bound_ratio": None}
    if record.get("error") or not record.get("step_time_s"):
        return out
    out["compute_step_time_s"] = compute_step_s(record)
    sides = [s for s in (out["compute_step_time_s"], record.get("wire_step_time_s")) if s]
    if sides:
        out["bound_step_time_s"] = max(sides)
        out["bound_ratio"] = record["step_time_s"] / out["bound_step_time_s"]
    return out
