"""Every bench record against its bound: the longest of its compute alone, its wire time and
its busiest device's CPU time.

A run's compute alone comes from its workload's calibration (:mod:`ralp.bench.calibrated`:
one device's step times inside its budget, measured just before the run), through the
planner's step formula with every link infinitely fast
(:func:`ralp.planner.topology.compute_step_s`); its wire time is the busiest link
direction's bytes at the link's rate (:func:`ralp.bench.records.derived_figures`); its CPU
time is the CPU the busiest budgeted device used over the measured window, at its budget,
per step (:func:`cpu_step_s`): the work a device did beyond the calibrated compute (gRPC's
and Gloo's copies, a PS task's updates and offloaded layers) counts there. A step can be no
shorter than any of them, so ``bound_ratio`` = step / bound says how far a run is from what
its compute, its network and its devices' CPU allow, and the side says which one bounds it.
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


def cpu_step_s(record: Mapping) -> tuple[float, str] | None:
    """The busiest budgeted device's CPU time per step and its task: the CPU it used over the
    measured window (the ``cpu`` field, read at the window's edges) at its budget's rate, per
    step (``workers`` worker batches, as ``step_time_s``); None without budgets."""
    cpu = record.get("cpu") or {}
    budget, wall = cpu.get("budget_cpus"), cpu.get("wall_s")
    steps, workers = record.get("measured_steps"), record.get("workers")
    used = {task: row["used_cpus"] for task, row in (cpu.get("tasks") or {}).items()
            if "budget_use" in row}  # the budgeted tasks (not a coordinator counted apart)
    if not (budget and wall and steps and workers and used):
        return None
    task = max(used, key=used.__getitem__)
    return used[task] * wall / budget * workers / steps, task


def bound_side(record: Mapping) -> str | None:
    """Which side ``record``'s bound is: "compute", "wire" or "cpu <task>"."""
    sides = {"compute": record.get("compute_step_time_s"),
             "wire": record.get("wire_step_time_s"), "cpu": record.get("cpu_step_time_s")}
    known = {side: s for side, s in sides.items() if s}
    if not known:
        return None
    side = max(known, key=known.__getitem__)
    if side == "cpu" and record.get("busiest_cpu_task"):
        return f"cpu {record['busiest_cpu_task']}"
    return side


def bound_figures(record: Mapping) -> dict:
    """``compute_step_time_s``, ``cpu_step_time_s`` (with ``busiest_cpu_task``),
    ``bound_step_time_s`` (the longest of them and ``wire_step_time_s``) and ``bound_ratio``
    (step time / bound) of a successful record; None where no side is known."""
    out = {"compute_step_time_s": None, "cpu_step_time_s": None, "busiest_cpu_task": None,
           "bound_step_time_s": None, "bound_ratio": None}
    if record.get("error") or not record.get("step_time_s"):
        return out
    out["compute_step_time_s"] = compute_step_s(record)
    busiest = cpu_step_s(record)
    if busiest is not None:
        out["cpu_step_time_s"], out["busiest_cpu_task"] = busiest
    sides = [s for s in (out["compute_step_time_s"], record.get("wire_step_time_s"),
                         out["cpu_step_time_s"]) if s]
    if sides:
        out["bound_step_time_s"] = max(sides)
        out["bound_ratio"] = record["step_time_s"] / out["bound_step_time_s"]
    return out
