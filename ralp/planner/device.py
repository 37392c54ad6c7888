"""Calibration on one simulated device: a model's step times measured inside the CPU budget
the bench gives each device (:mod:`ralp.emulation.budget`), in a fresh process that joins a
control group of its own first and sizes TensorFlow's thread pools to it, as a bench task does.

On a real cluster a task computes on its own device; on the budgeted simulated cluster it
computes within its budget. Either way, a step time measured here is what one device of that
cluster takes, with no other process lending it CPU.
"""

from __future__ import annotations

from ralp.cluster.fresh_process import run_in_fresh_process
from ralp.emulation.budget import Budget, budget_for
from ralp.planner.calibration import (
    DEFAULT_CALIBRATION_STEPS,
    Entry,
    calibrate_entry,
    load_source,
)

DEVICE = "dev"  # the one control group of a device calibration


def device_entry(source: str, batch_size: int, image_size: int, num_classes: int, *,
                 cpus: str = "auto", devices: int = 4,
                 steps: int = DEFAULT_CALIBRATION_STEPS) -> tuple[Entry, Budget]:
    """The calibration entry of ``source`` (a zoo name or a ``.keras`` path) measured on one
    device whose budget is ``cpus`` (as ``--device-cpus`` takes it) on a simulated cluster of
    ``devices`` devices; and that budget (shared CPUs, with the reason, where no control
    group can be made here)."""
    budget = budget_for(cpus, devices)
    with budget.groups([DEVICE]) as groups:
        entry = run_in_fresh_process(
            _entry, source, batch_size, image_size, num_classes, steps,
            group=groups.group(DEVICE) if groups else None, env=budget.task_env(),
        )
    return entry, budget


def _entry(source: str, batch_size: int, image_size: int, num_classes: int, steps: int) -> Entry:
    from dataclasses import replace

    net = load_source(source, num_classes, image_size)
    entry = calibrate_entry(net, batch_size, steps=steps)
    return entry if source.endswith(".keras") else replace(entry, model=source)
