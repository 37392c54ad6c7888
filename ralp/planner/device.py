"""Calibration on one simulated device: a model's step times measured inside the CPU budget
the bench gives each device (:mod:`ralp.emulation.budget`), in a fresh process that joins a
control group of its own first and sizes TensorFlow's thread pools to it, as a bench task does.

On a real cluster a task computes on its own device; on the budgeted simulated cluster it
computes within its budget. Either way, a step time measured here is what one device of that
cluster takes, with no other process lending it CPU. The CPU cost of a byte (gRPC's and
Gloo's) is CPU seconds whatever the budget: a device spends it at its budget's pace
(:attr:`ralp.planner.model.Host.device_cpus`).
"""

from __future__ import annotations

from ralp.cluster.fresh_process import run_in_fresh_process
from ralp.emulation.budget import Budget, budget_for
from ralp.planner.calibration import (
    DEFAULT_CALIBRATION_STEPS,
    Calibration,
    Entry,
    calibrate_entry,
    load_source,
    this_machine,
)
from ralp.planner.collective_cost import ring_costs
from ralp.planner.host import OVERLAP_FIELDS, Host, with_overlaps
from ralp.planner.modes import PlannerError
from ralp.planner.transfer import measure_message_cpu, measure_transfer

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


def calibrate_device(source: str, batch_size: int, image_size: int, num_classes: int,
                     cpus: str = "auto", devices: int = 4, *,
                     steps: int = DEFAULT_CALIBRATION_STEPS,
                     overlaps: Host | None = None,
                     overlap_ratios: tuple[float, ...] | None = None,
                     transfer_rates: tuple[int, ...] = ()) -> Calibration:
    """A calibration for a cluster of budgeted devices: ``source``'s compute on one device
    (:func:`device_entry`), the CPU cost of a gRPC transfer (per byte and per transfer) and of
    a byte in Horovod's ring
    and in TensorFlow's (:func:`ralp.planner.collective_cost.ring_costs`), the devices' CPUs,
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
    return Calibration(with_fabric_transfer(host, budget, transfer_rates), [entry], machine)


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
    two devices of ``budget`` (:func:`ralp.planner.ring_overlap.measure_ring`), the overlap
    at each wire / CPU ratio of ``ratios`` (default
    :data:`ralp.planner.ring_overlap.OVERLAP_RATIOS`): the figure at the ratio nearest 1 and,
    where several were measured, the curve. A ring is left unmeasured, with a warning, where
    it cannot be (no budget, its cost not calibrated, no Horovod, no namespaces)."""
    from dataclasses import replace

    from ralp.errors import RalpError, warn
    from ralp.planner.host import RING_COSTS, RING_FIELDS
    from ralp.planner.ring_overlap import OVERLAP_RATIOS, measure_ring, nearest_even

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
    ``budget`` (:func:`ralp.planner.fabric_transfer.measure_fabric_transfer`) at each of
    ``rates`` (bits/s) it lacks, added to those it has. Left as it is, with a warning, where
    it cannot be measured (no budget, no namespaces)."""
    from dataclasses import replace

    from ralp.errors import RalpError, warn
    from ralp.planner.fabric_transfer import measure_fabric_transfer

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


def _entry(source: str, batch_size: int, image_size: int, num_classes: int, steps: int) -> Entry:
    from dataclasses import replace

    net = load_source(source, num_classes, image_size)
    entry = calibrate_entry(net, batch_size, steps=steps)
    return entry if source.endswith(".keras") else replace(entry, model=source)
