"""The planner's Python API: calibrate a Keras model on this host, then recommend a mode.

>>> cal = ralp.calibrate(model, batch_size=8)                           # doctest: +SKIP
>>> rec = ralp.recommend(model, devices=[8, 16], bandwidth=["10gbit"],  # doctest: +SKIP
...                      batch_size=8, calibration=cal)
>>> [(p.devices, p.mode, round(p.images_per_sec)) for p in rec.best()]  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_THRESHOLD
from ralp.planner.calibration import (
    DEFAULT_CALIBRATION_STEPS,
    Calibration,
    calibrate_entry,
    load_source,
    shape_facts,
    this_machine,
)
from ralp.planner.cluster_plan import ClusterPlan, installed_horovod, plan_cluster
from ralp.planner.modes import MODES
from ralp.planner.workload import Workload
from ralp.profiler.api import profile
from ralp.units import parse_bandwidth


def calibrate(model, batch_size: int = DEFAULT_BATCH_SIZE, *,
              steps: int = DEFAULT_CALIBRATION_STEPS) -> Calibration:
    """A calibration of ``model`` (a Keras model) on this host: its step times, whole and
    split, measured in this process (``python -m ralp.planner --calibrate`` on the user's own
    GPU host gives the planner that device's compute).

    Args:
        model: the Keras model; it is trained on random data for ``steps`` timed steps after
            warm-up (its weights change: calibrate a clone to keep them).
        batch_size: the per-device batch.
        steps: timed steps of each step function.

    Returns:
        A :class:`Calibration` with one entry.
    """
    return Calibration([calibrate_entry(model, batch_size, steps=steps)], this_machine())


def calibrate_zoo(model: str, batch_size: int, image_size: int, num_classes: int, *,
                  steps: int = DEFAULT_CALIBRATION_STEPS, device_cpus: str | None = None,
                  devices: int = 4) -> Calibration:
    """A calibration of the zoo's ``model`` (or a saved ``.keras`` path) on this host, in
    this process; with ``device_cpus`` (the budgeted simulated cluster of ``devices`` devices,
    as ``--device-cpus`` takes it), on one device inside its budget
    (:func:`ralp.planner.device.device_entry`)."""
    if device_cpus is not None:
        from ralp.planner.device import device_entry

        entry, budget = device_entry(model, batch_size, image_size, num_classes,
                                     cpus=device_cpus, devices=devices, steps=steps)
        return Calibration([entry], f"{this_machine()}, {budget.describe()}")
    net = load_source(model, num_classes, image_size)
    entry = calibrate_entry(net, batch_size, steps=steps)
    if not model.endswith(".keras"):
        entry = replace(entry, model=model)
    return Calibration([entry], this_machine())


def recommend(model, devices: Sequence[int], bandwidth: Sequence[str], *,
              batch_size: int = DEFAULT_BATCH_SIZE, calibration: Calibration | None = None,
              threshold: float = DEFAULT_THRESHOLD) -> ClusterPlan:
    """Every mode's predicted throughput for ``model`` on each of ``devices`` at each
    ``bandwidth`` ('10gbit'), the best per setting, and the skewness rule's verdict. Without
    a ``calibration`` (or one lacking this model) the model is calibrated here first.

    Returns:
        A :class:`ClusterPlan` of machines of one device each, from the planner's core
        (:mod:`ralp.planner.topology`), as ``python -m ralp.planner --devices`` gives it:
        ``predictions``, ``best()``, ``decisions()`` and ``skewness_verdict``.

    Raises:
        PlannerError: no mode can run on those devices, or ralp cannot train the model
            (several outputs: the message ``ralp.wrap`` gives).
    """
    work = Workload(profile(model, batch_size, threshold=threshold))  # a refusal: at once
    image, classes = shape_facts(model)
    cal = calibration or calibrate(model, batch_size)
    try:
        entry = cal.find(model.name, batch_size, image, classes)
    except ValueError:
        entry = calibrate_entry(model, batch_size)
    bits = [parse_bandwidth(b) for b in bandwidth]
    return plan_cluster(work, None, entry.compute, nodes=list(devices), gpus_per_node=1,
                        bandwidths=bits, intra_bits=math.inf, modes=MODES, sync="async",
                        horovod_build=installed_horovod(), source=model.name, on_gpus=False)
