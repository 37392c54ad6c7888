"""The planner's Python API: calibrate a Keras model on this host, then recommend a mode.

>>> cal = ralp.calibrate(model, batch_size=8, shared_host=False)        # doctest: +SKIP
>>> rec = ralp.recommend(model, devices=[8, 16], bandwidth=["10gbit"],  # doctest: +SKIP
...                      batch_size=8, calibration=cal)
>>> [(p.devices, p.mode, round(p.images_per_sec)) for p in rec.best()]  # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace

from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_THRESHOLD
from ralp.errors import warn
from ralp.planner.allreduce import AllreduceProbeError
from ralp.planner.beside import measure_beside
from ralp.planner.calibration import (
    DEFAULT_CALIBRATION_STEPS,
    Calibration,
    Entry,
    calibrate_entry,
    load_source,
    shape_facts,
    this_machine,
)
from ralp.planner.capacity import HOST_CAPACITY_PROCESSES, measure_host_capacities
from ralp.planner.cluster_plan import ClusterPlan, installed_horovod, plan_cluster
from ralp.planner.collective_cost import ring_costs
from ralp.planner.device import calibrate_device, device_entry
from ralp.planner.model import Host
from ralp.planner.modes import MODES, PlannerError
from ralp.planner.transfer import measure_transfer
from ralp.planner.workload import Workload
from ralp.profiler.api import profile
from ralp.units import parse_bandwidth


def transfer_host(shared_host: bool, capacity: float = 1.0) -> Host:
    """This host's transfer costs: gRPC's (a fresh process) and, where the cluster shares
    this host, the rings' (Gloo's and TensorFlow's: :func:`ralp.planner.collective_cost.ring_costs`)
    and the cores that serve them."""
    message_s, cpu_s_per_byte, _ = measure_transfer()
    if not shared_host:
        return Host(False, cpu_s_per_byte, message_s)
    ring, collective = ring_costs()
    return Host(True, cpu_s_per_byte, message_s, capacity, cores=os.cpu_count() or 1,
                ring_cpu_s_per_byte=ring, collective_cpu_s_per_byte=collective)


def calibrate(model, batch_size: int = DEFAULT_BATCH_SIZE, *, shared_host: bool = False,
              steps: int = DEFAULT_CALIBRATION_STEPS, device_cpus: str | None = None,
              devices: int = 4) -> Calibration:
    """A calibration of ``model`` (a Keras model) on this host: its compute times and the
    cost of a transfer (measured in a fresh process). ``shared_host``: the cluster to plan
    shares this host's cores (the simulated netns cluster on shared CPUs), so compute and
    transfers contend for them; the host's capacity and Stanza's phases under Horovod are then
    measured too, by helper processes that load the model from a ``.keras`` file saved here
    (where it cannot be saved and loaded back, a warning says so and those two are left out).
    ``device_cpus``: the budgeted simulated cluster of ``devices`` devices (as
    ``--device-cpus`` takes it): the compute is measured on one device inside its budget, by
    a process that loads the model from a ``.keras`` file saved here."""
    if device_cpus is not None:
        return _calibrate_on_device(model, batch_size, device_cpus, devices, steps)
    entry = calibrate_entry(model, batch_size, steps=steps)
    if not shared_host:
        return Calibration(transfer_host(False), [entry], this_machine())
    with tempfile.TemporaryDirectory(prefix="ralp-calibrate-") as folder:
        path = os.path.join(folder, f"{model.name}.keras")
        try:
            model.save(path)
            load_source(path, entry.num_classes, entry.image_size)  # as the helpers will
        except Exception as e:  # noqa: BLE001 - Keras raises many types; say why and go on
            warn(f"{model.name} cannot be saved and loaded back ({type(e).__name__}: "
                          f"{e}): the host's capacity and Stanza's phases under Horovod are "
                          "not measured (capacity 1 serves)")
            return Calibration(transfer_host(True), [entry], this_machine())
        return _calibrate_shared(entry, path)


def calibrate_zoo(model: str, batch_size: int, image_size: int, num_classes: int, *,
                  shared_host: bool, steps: int = DEFAULT_CALIBRATION_STEPS,
                  device_cpus: str | None = None, devices: int = 4,
                  overlaps: Host | None = None,
                  overlap_ratios: tuple[float, ...] | None = None,
                  transfer_rates: tuple[int, ...] = (),
                  compute_only: bool = False) -> Calibration:
    """A calibration of the zoo's ``model`` on this host (``python -m ralp.planner --calibrate``):
    its compute times, the cost of a transfer and, for a ``shared_host`` (the simulated
    cluster on shared CPUs), how many single-process steps this host runs side by side and
    Stanza's phases under Horovod. With ``device_cpus`` (the budgeted simulated cluster of
    ``devices`` devices, as ``--device-cpus`` takes it), the compute is measured on one device
    inside its budget (:func:`ralp.planner.device.device_entry`), and the rings' overlaps
    are ``overlaps``'s where given, else measured at the wire / CPU ratios ``overlap_ratios``,
    and gRPC's CPU per byte on the fabric at the link rates ``transfer_rates`` (bits/s)
    (:func:`ralp.planner.device.calibrate_device`). ``compute_only``: the model's step times
    alone (on the device where ``device_cpus`` says), no transfer or ring probed: what the
    planner's core needs."""
    if compute_only:
        if device_cpus is not None:
            entry, budget = device_entry(model, batch_size, image_size, num_classes,
                                         cpus=device_cpus, devices=devices, steps=steps)
            return Calibration(Host(False, device_cpus=budget.cpus), [entry], this_machine())
        net = load_source(model, num_classes, image_size)
        entry = replace(calibrate_entry(net, batch_size, steps=steps), model=model)
        return Calibration(Host(False), [entry], this_machine())
    if device_cpus is not None:
        return calibrate_device(model, batch_size, image_size, num_classes, device_cpus,
                                devices, steps=steps, overlaps=overlaps,
                                overlap_ratios=overlap_ratios,
                                transfer_rates=transfer_rates)
    net = load_source(model, num_classes, image_size)
    entry = replace(calibrate_entry(net, batch_size, steps=steps), model=model)
    if not shared_host:
        return Calibration(transfer_host(False), [entry], this_machine())
    return _calibrate_shared(entry, model)


def _calibrate_on_device(model, batch_size: int, device_cpus: str, devices: int,
                         steps: int) -> Calibration:
    image, classes = shape_facts(model)
    with tempfile.TemporaryDirectory(prefix="ralp-calibrate-") as folder:
        path = os.path.join(folder, f"{model.name}.keras")
        try:
            model.save(path)
        except Exception as e:  # noqa: BLE001 - Keras raises many types; say why
            raise PlannerError(f"{model.name} cannot be saved to a .keras file for the device "
                               f"that measures it ({type(e).__name__}: {e}); calibrate it "
                               "without device_cpus") from None
        return calibrate_device(path, batch_size, image, classes, device_cpus, devices,
                                steps=steps)


def _calibrate_shared(entry: Entry, source: str) -> Calibration:
    """The shared host's calibration: ``entry`` (its single-process times) with the host's
    capacity and Stanza's phases, measured by helper processes that load the model from
    ``source`` (:func:`load_source`: a zoo name or a saved ``.keras`` path)."""
    workload = (entry.batch_size, entry.image_size, entry.num_classes)
    capacities = measure_host_capacities(source, *workload)
    capacity = dict(capacities).get(HOST_CAPACITY_PROCESSES, capacities[0][1])
    entry = replace(entry, capacity=capacity, capacities=[list(c) for c in capacities])
    if entry.head_s is not None:  # Stanza's phases beside waiting ranks
        try:
            b = measure_beside(source, *workload)
            entry = replace(entry, stanza_beside=[b["conv_ranks"], b["heads_s"], b["tail_s"]])
        except AllreduceProbeError as e:
            warn(f"Stanza's phases under Horovod not measured ({e}); its "
                          "single-process times serve")
    host = replace(transfer_host(True, capacity), capacities=capacities)
    return Calibration(host, [entry], this_machine())


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
        PlannerError: no mode can run on those devices.
    """
    image, classes = shape_facts(model)
    cal = calibration or calibrate(model, batch_size)
    try:
        entry = cal.find(model.name, batch_size, image, classes)
    except ValueError:
        entry = calibrate_entry(model, batch_size)
    work = Workload(profile(model, batch_size, threshold=threshold))
    bits = [parse_bandwidth(b) for b in bandwidth]
    return plan_cluster(work, None, entry.compute, nodes=list(devices), gpus_per_node=1,
                        bandwidths=bits, intra_bits=math.inf, modes=MODES, sync="async",
                        horovod_build=installed_horovod(), source=model.name, on_gpus=False)
