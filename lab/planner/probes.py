"""Calibrations of the simulated cluster: a model's compute (the product's calibration) and
the probes of the host the lab's step models read: the cost of a gRPC transfer, the rings'
CPU per byte and, where the cluster shares this host's cores, the host's capacity for steps
side by side and Stanza's phases under Horovod. On budgeted devices the probes are
:func:`lab.planner.device_probes.calibrate_device`'s.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace

from lab.planner.allreduce import AllreduceProbeError
from lab.planner.capacity import HOST_CAPACITY_PROCESSES, measure_host_capacities
from lab.planner.collective_cost import ring_costs
from lab.planner.device_probes import calibrate_device
from lab.planner.host import Host
from lab.planner.host_calibration import HostCalibration, HostEntry
from lab.planner.stanza_phases_probe import measure_beside
from lab.planner.transfer import measure_transfer
from ralp.defaults import DEFAULT_BATCH_SIZE
from ralp.errors import warn
from ralp.planner.calibration import (
    DEFAULT_CALIBRATION_STEPS,
    calibrate_entry,
    load_source,
    shape_facts,
    this_machine,
)
from ralp.planner.modes import PlannerError


def transfer_host(shared_host: bool, capacity: float = 1.0) -> Host:
    """This host's transfer costs: gRPC's (a fresh process) and, where the cluster shares
    this host, the rings' (Gloo's and TensorFlow's: :func:`lab.planner.collective_cost.ring_costs`)
    and the cores that serve them."""
    message_s, cpu_s_per_byte, _ = measure_transfer()
    if not shared_host:
        return Host(False, cpu_s_per_byte, message_s)
    ring, collective = ring_costs()
    return Host(True, cpu_s_per_byte, message_s, capacity, cores=os.cpu_count() or 1,
                ring_cpu_s_per_byte=ring, collective_cpu_s_per_byte=collective)


def calibrate_host(model, batch_size: int = DEFAULT_BATCH_SIZE, *, shared_host: bool = False,
                   steps: int = DEFAULT_CALIBRATION_STEPS, device_cpus: str | None = None,
                   devices: int = 4) -> HostCalibration:
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
        return HostCalibration(transfer_host(False), [HostEntry.of(entry)], this_machine())
    with tempfile.TemporaryDirectory(prefix="ralp-calibrate-") as folder:
        path = os.path.join(folder, f"{model.name}.keras")
        try:
            model.save(path)
            load_source(path, entry.num_classes, entry.image_size)  # as the helpers will
        except Exception as e:  # noqa: BLE001 - Keras raises many types; say why and go on
            warn(f"{model.name} cannot be saved and loaded back ({type(e).__name__}: "
                 f"{e}): the host's capacity and Stanza's phases under Horovod are "
                 "not measured (capacity 1 serves)")
            return HostCalibration(transfer_host(True), [HostEntry.of(entry)], this_machine())
        return _calibrate_shared(entry, path)


def calibrate_zoo_host(model: str, batch_size: int, image_size: int, num_classes: int, *,
                       shared_host: bool, steps: int = DEFAULT_CALIBRATION_STEPS,
                       device_cpus: str | None = None, devices: int = 4,
                       overlaps: Host | None = None,
                       overlap_ratios: tuple[float, ...] | None = None,
                       transfer_rates: tuple[int, ...] = ()) -> HostCalibration:
    """A calibration of the zoo's ``model`` on this host (``python -m lab.planner.calibrate``):
    its compute times, the cost of a transfer and, for a ``shared_host`` (the simulated
    cluster on shared CPUs), how many single-process steps this host runs side by side and
    Stanza's phases under Horovod. With ``device_cpus`` (the budgeted simulated cluster of
    ``devices`` devices, as ``--device-cpus`` takes it), the compute is measured on one device
    inside its budget (:func:`ralp.planner.device.device_entry`), and the rings' overlaps
    are ``overlaps``'s where given, else measured at the wire / CPU ratios ``overlap_ratios``,
    and gRPC's CPU per byte on the fabric at the link rates ``transfer_rates`` (bits/s)
    (:func:`lab.planner.device_probes.calibrate_device`)."""
    if device_cpus is not None:
        return calibrate_device(model, batch_size, image_size, num_classes, device_cpus,
                                devices, steps=steps, overlaps=overlaps,
                                overlap_ratios=overlap_ratios,
                                transfer_rates=transfer_rates)
    net = load_source(model, num_classes, image_size)
    entry = replace(calibrate_entry(net, batch_size, steps=steps), model=model)
    if not shared_host:
        return HostCalibration(transfer_host(False), [HostEntry.of(entry)], this_machine())
    return _calibrate_shared(entry, model)


def _calibrate_on_device(model, batch_size: int, device_cpus: str, devices: int,
                         steps: int) -> HostCalibration:
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


def _calibrate_shared(entry, source: str) -> HostCalibration:
    """The shared host's calibration: ``entry`` (its single-process times) with the host's
    capacity and Stanza's phases, measured by helper processes that load the model from
    ``source`` (:func:`load_source`: a zoo name or a saved ``.keras`` path)."""
    entry = HostEntry.of(entry)
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
    return HostCalibration(host, [entry], this_machine())


