"""The simulated cluster's probes on budgeted devices: besides one device's compute
(:func:`ralp.planner.device.device_entry`), the CPU cost of a gRPC transfer and of a ring's
byte, each ring's overlap of wire and CPU, and gRPC's CPU per byte on the fabric. A CPU cost is
CPU seconds whatever the budget: a device spends it at its budget's pace
(:attr:`lab.planner.host.Host.device_cpus`).
"""

from __future__ import annotations

from lab.planner.collective_cost import ring_costs
from lab.planner.host import OVERLAP_FIELDS, Host, with_overlaps
from lab.planner.host_calibration import HostCalibration, HostEntry
from lab.planner.transfer import measure_message_cpu, measure_transfer
from ralp.emulation.budget import Budget, budget_for
from ralp.planner.calibration import DEFAULT_CALIBRATION_STEPS, this_machine
from ralp.planner.device import device_entry
from ralp.planner.modes import PlannerError


def calibrate_device(source: str, batch_size: int, image_size: int, num_classes: int,
                     cpus: str = "auto", devices: int = 4, *,
                     steps: int = DEFAULT_CALIBRATION_STEPS,
                     overlaps: Host | None = None,
                     overlap_ratios: tuple[float, ...] | None = None,
                     transfer_rates: tuple[int, ...] = ()) -> HostCalibration:
    """A calibration for a cluster of budgeted devices: ``source``'s compute on one device
    (:func:`device_entry`), the CPU cost of a gRPC transfer (per byte and per transfer) and of
    a byte in Horovod's ring
    and in TensorFlow's (:func:`lab.planner.collective_cost.ring_costs`), the devices' CPUs,
    and each ring's overlap (:func:`with_ring_overlap`, at the wire / CPU ratios
    ``overlap_ratios``), or ``overlaps``'s where given (a calibration of the same budget: the
    overlap is the ring's, not the model's), and gRPC's CPU per byte on the fabric at each
    link rate of ``transfer_rates`` (bits/s) not lent by ``overlaps``
    (:func:`with_fabric_transfer`).

    Raises:
        PlannerError: ``overlaps`` has none, or was measured on devices of another budget.
    """
    if overlaps is not None:
        _check_lent(overlaps, budget_for(cpus, devices))
    entry, budget = device_entry(source, batch_size, image_size, num_classes, cpus=cpus,
                                 devices=devices, steps=steps)
    message_s, cpu_s_per_byte, _ = measure_transfer()
    cpu_s_per_message, _ = measure_message_cpu()
    ring, collective = ring_costs()
    host = Host(False, cpu_s_per_byte, message_s, ring_cpu_s_per_byte=ring,
                collective_cpu_s_per_byte=collective, device_cpus=budget.cpus,
                cpu_s_per_message=cpu_s_per_message)
    machine = f"{this_machine()}, {budget.describe()}"
    host = (with_overlaps(host, overlaps) if overlaps is not None
            else with_ring_overlap(host, budget, overlap_ratios))
    return HostCalibration(with_fabric_transfer(host, budget, transfer_rates),
                           [HostEntry.of(entry)], machine)


def _check_lent(overlaps: Host, budget: Budget) -> None:
    """Raise PlannerError unless ``overlaps`` has rings' overlaps measured on ``budget``."""
    if budget.cpus is None:
        raise PlannerError(f"no device budget here ({budget.describe()}): the rings' overlaps "
                           "of a budgeted calibration do not apply; leave out --overlap-from")
    if overlaps.device_cpus is None:
        raise PlannerError("the calibration given for the rings' overlaps is not of budgeted "
                           "devices: give one made with --device-cpus, or leave it out")
    if overlaps.device_cpus != budget.cpus:
        raise PlannerError(f"the rings' overlaps given were measured on devices of "
                           f"{overlaps.device_cpus} CPU; these have {budget.cpus}: measure "
                           "them here (leave out the calibration they came from)")
    if all(getattr(overlaps, name) in (None, ()) for name in OVERLAP_FIELDS):
        raise PlannerError("the calibration given has no rings' overlaps (its probes did not "
                           "run): measure them here (leave it out)")


def with_ring_overlap(host: Host, budget: Budget,
                      ratios: tuple[float, ...] | None = None) -> Host:
    """``host`` with each ring's (Gloo's, TensorFlow's) wire factor and overlap measured on
    two devices of ``budget`` (:func:`lab.planner.ring_overlap.measure_ring`), the overlap
    at each wire / CPU ratio of ``ratios`` (default
    :data:`lab.planner.ring_overlap.OVERLAP_RATIOS`): the figure at the ratio nearest 1 and,
    where several were measured, the curve. A ring is left unmeasured, with a warning, where
    it cannot be (no budget, its cost not calibrated, no Horovod, no namespaces)."""
    from dataclasses import replace

    from lab.planner.host import RING_COSTS, RING_FIELDS
    from lab.planner.ring_overlap import OVERLAP_RATIOS, measure_ring, nearest_even
    from ralp.errors import RalpError, warn

    if budget.hierarchy is None or budget.cpus is None:
        return host
    found = {}
    for library, cost in RING_COSTS.items():
        if getattr(host, cost) is None:
            continue
        try:
            measured = measure_ring(host, budget, library, ratios or OVERLAP_RATIOS)
        except RalpError as e:
            warn(f"the {library} ring's overlap not measured ({e}); the model takes the "
                 "slower of its wire and CPU, and its bytes at the links' rate")
            continue
        factor, field, curve_field = RING_FIELDS[library]
        points = sorted((round(p.ratio, 4), round(p.overlap, 4)) for p in measured.curve)
        if measured.wire_factor is not None:
            found[factor] = round(measured.wire_factor, 4)
        found[field] = nearest_even(points)[1]
        if len(points) > 1:  # a curve only where there is one: it outranks a figure
            found[curve_field] = tuple(points)
    return replace(host, **found)


def with_fabric_transfer(host: Host, budget: Budget, rates: tuple[int, ...]) -> Host:
    """``host`` with gRPC's CPU per byte measured on the fabric between two devices of
    ``budget`` (:func:`lab.planner.fabric_transfer.measure_fabric_transfer`) at each of
    ``rates`` (bits/s) it lacks, added to those it has. Left as it is, with a warning, where
    it cannot be measured (no budget, no namespaces)."""
    from dataclasses import replace

    from lab.planner.fabric_transfer import measure_fabric_transfer
    from ralp.errors import RalpError, warn

    known = dict(host.fabric_cpu_s_per_byte)
    missing = [rate for rate in rates if float(rate) not in known]
    if not missing:
        return host
    if budget.hierarchy is None or budget.cpus is None:
        warn(f"gRPC's CPU on the fabric not measured: no device budget here "
             f"({budget.describe()}); the loopback figure serves")
        return host
    for rate in missing:
        try:
            known[float(rate)] = measure_fabric_transfer(budget, rate).cpu_s_per_byte
        except RalpError as e:
            warn(f"gRPC's CPU on the fabric at {rate} bit/s not measured ({e}); the "
                 "loopback figure serves")
    return replace(host, fabric_cpu_s_per_byte=tuple(sorted(known.items())))


