"""Stanza's step time on a cluster: its phases one after the other (layer separation on
Horovod: CONV ranks allreduce the head, FC ranks hold the tail). Pure functions of measured
inputs, as :mod:`lab.planner.ring_step`, whose ring terms it uses."""

from __future__ import annotations

from lab.planner.host import Host
from lab.planner.ring_step import (
    beside_backward_s,
    device_bytes_phase,
    ring_wire_s,
    shared_cpu_s,
)
from ralp.planner.terms import Compute, Links


def _beside_factors(compute: Compute, host: Host) -> tuple[float, float]:
    """How much longer Stanza's heads' and tail's phases take under Horovod on a shared host
    than its single-process times say: measured (``compute.stanza_beside``, n CONV ranks and
    one FC rank) over the same phases from single-process times at that shape, and carried to
    any shape. Assumption: the waiting ranks' pull on the CPU is the same share at every
    shape (measured at one). (1, 1) where not measured."""
    beside = getattr(compute, "stanza_beside", None)  # a SharedCompute's
    if beside is None:
        return 1.0, 1.0
    conv, heads_s, tail_s = beside
    heads_alone = host.together_s(conv * compute.head_s, conv)
    tail_alone = compute.tail_group_s(conv)
    return (heads_s / heads_alone if heads_alone > 0 else 1.0,
            tail_s / tail_alone if tail_alone > 0 else 1.0)


def stanza_step_time(compute: Compute, links: Links, workers: int, bandwidth: float,
                     host: Host) -> float:
    """Stanza's step: its phases (:func:`stanza_phase_times`) one after another, except that
    the rings start as the CONV ranks' backward pass produces the head's gradients: they run
    beside it by the planner's one overlap rule, their bytes' CPU on the same processor
    (:func:`lab.planner.ring_step.beside_backward_s`). The heads' phase is taken as a third
    forward and two thirds backward, the backward pass after the tail."""
    phases = stanza_phase_times(compute, links, workers, bandwidth, host)
    head_ring, tail_ring = links.rings
    fc = len(links.ps_tx)
    if host.shared:
        ring_bytes = workers * head_ring + (fc * tail_ring if fc > 1 else 0)
        cpu_s = shared_cpu_s(host, host.ring_cost * ring_bytes)
    else:
        cpu_s = host.on_device(host.ring_cost * max(head_ring, tail_ring if fc > 1 else 0))
    return (phases["tail"] + phases["exchange"]
            + beside_backward_s(phases["heads"], phases["rings"], cpu_s))


def stanza_phase_times(compute: Compute, links: Links, workers: int, bandwidth: float,
                       host: Host) -> dict[str, float]:
    """Stanza (layer separation on Horovod), ``workers`` = n_c CONV ranks, ``len(links.ps_tx)``
    = n_f FC ranks, each FC rank serving a group of at most g = ceil(n_c / n_f) CONV ranks.
    One lockstep step, its phases in order (the rings overlap the heads' backward pass in the
    step, :func:`stanza_step_time`; here each phase's time alone):

    1. every CONV rank runs the head forward and sends its boundary activations and labels
       to its group's FC rank;
    2. the FC rank runs the tail on its group's batches stacked (g batches:
       :meth:`Compute.tail_group_s`, measured at one and at several batches stacked) and sends
       the activations' gradients back; the CONV ranks finish the head's backward (``head_s``
       in all);
    3. the CONV ranks ring-allreduce the head's gradients while, when n_f > 1, the FC ranks
       ring-allreduce the tail's (the slower ring counts; 2 (ranks - 1) hops each).

    Phases 1-2 cross the busiest FC link: its bytes in (activations, labels) then out
    (gradients), less its tail ring, at ``bandwidth`` (over Gloo's measured wire factor,
    :meth:`Host.wire_factor`: the exchange and the rings are Gloo transfers). On a shared
    host the phases take turns on its cores, as in :func:`horovod_step_time`: the CONV ranks' heads together, the
    FC ranks' tails together (one FC rank alone), and each byte phase the slower of its wire
    and its bytes' CPU time (Gloo's: the exchange and the rings are Horovod collectives).

    Returns the step's time by phase, in seconds: ``heads`` (forward and backward, all CONV
    ranks), ``tail``, ``exchange`` (both alltoalls) and ``rings``; measured phases to set
    beside them come from a Horovod timeline (:mod:`lab.tools.stanza_phases`)."""
    fc = len(links.ps_tx)
    group = -(-workers // fc)
    head_ring, tail_ring = links.rings
    exchange = host.wire_factor() * max(  # a Gloo transfer, as the rings are
        tx + rx - 2 * tail_ring for tx, rx in zip(links.ps_tx, links.ps_rx, strict=True)
    ) / bandwidth
    rings = max(ring_wire_s(host, workers, head_ring, bandwidth),
                ring_wire_s(host, fc, tail_ring, bandwidth) if fc > 1 else 0.0)
    if host.shared:
        ring_bytes = workers * head_ring + (fc * tail_ring if fc > 1 else 0)
        heads_beside, tail_beside = _beside_factors(compute, host)
        return {"heads": host.together_s(workers * compute.head_s, workers) * heads_beside,
                "tail": host.together_s(fc * compute.tail_group_s(group), fc) * tail_beside,
                "exchange": host.bytes_phase_s(exchange,
                                               host.ring_cost * (links.total - ring_bytes)),
                "rings": host.bytes_phase_s(rings, host.ring_cost * ring_bytes)}
    # On devices: the FC rank's end of its group's exchange (a Gloo alltoall), and each
    # rank's share of the rings, on its device (:func:`device_bytes_phase`).
    fc_bytes = max(tx + rx - 2 * tail_ring for tx, rx in zip(links.ps_tx, links.ps_rx, strict=True))
    ring_bytes = max(head_ring, tail_ring if fc > 1 else 0)
    return {"heads": compute.head_s, "tail": compute.tail_group_s(group),
            "exchange": device_bytes_phase(host, exchange, fc_bytes / 2),
            "rings": device_bytes_phase(host, rings, ring_bytes)}
