"""The allreduce modes' step on a cluster: Horovod's ring (Gloo) and TensorFlow's own
(``MultiWorkerMirroredStrategy``), and the ring's terms Stanza's step shares
(:mod:`lab.planner.stanza_step`). Small pure functions of measured inputs (no TensorFlow).

Every worker runs the whole model and allreduces each gradient as its backward pass
produces it: the ring runs beside the backward pass by the planner's one overlap rule
(:func:`ralp.planner.terms.behind_backward_s`), but its bytes' CPU work and the compute share
the rank's processor, so they add (:func:`beside_backward_s`). A ring phase that only moves
bytes takes the wire or its bytes' CPU on the busiest rank's device, the slower, plus the
part of the faster that does not hide behind it (:func:`device_bytes_phase`).
"""

from __future__ import annotations

from lab.planner.host import Host
from ralp.planner.terms import Compute, Links, behind_backward_s, forward_backward_s


def horovod_step_time(compute: Compute, links: Links, workers: int, bandwidth: float,
                      host: Host) -> float:
    """Horovod ring allreduce: every worker runs the whole model and allreduces each
    gradient as its backward pass produces it (:func:`beside_backward_s`). The ring sends
    2 x S x (W-1)/W per worker, both directions at once (full duplex), in 2 (W-1) hops. On a
    shared host the W workers compute together (:meth:`Host.together_s`) and the ring takes
    its wire time or its bytes' CPU time (Gloo's, :attr:`Host.ring_cost`, over every core),
    the slower (:meth:`Host.bytes_phase_s`)."""
    return _ring_step_time(compute, links, workers, bandwidth, host, host.ring_cost)


def collective_step_time(compute: Compute, links: Links, workers: int, bandwidth: float,
                         host: Host) -> float:
    """TensorFlow's own ring allreduce (``MultiWorkerMirroredStrategy``): Horovod's step
    (:func:`horovod_step_time`) with the CPU cost of its ring's bytes
    (:attr:`Host.collective_cost`: gRPC calls, about twice Gloo's per byte on this host)."""
    return _ring_step_time(compute, links, workers, bandwidth, host, host.collective_cost,
                           collective=True)  # its own measured overlap, not Gloo's


def _ring_step_time(compute: Compute, links: Links, workers: int, bandwidth: float,
                    host: Host, ring_cost: float, collective: bool = False) -> float:
    ring_s, _ = ring_phase_terms(host, workers, links.worker_tx, bandwidth, ring_cost,
                                 collective)
    if host.shared:
        return beside_backward_s(host.together_s(workers * compute.full_s, workers),
                                 host.bytes_phase_s(ring_s, ring_cost * links.total),
                                 shared_cpu_s(host, ring_cost * links.total))
    return beside_backward_s(compute.full_s,
                             device_bytes_phase(host, ring_s, links.worker_tx, ring_cost,
                                                collective),
                             host.on_device(ring_cost * links.worker_tx))


def beside_backward_s(compute_s: float, ring_s: float, cpu_s: float) -> float:
    """A step's compute (``compute_s``, forward and backward) with a ring of its gradients
    (``ring_s``) started as the backward pass produces them: the ring runs beside the
    backward pass by the planner's rule (:func:`ralp.planner.terms.behind_backward_s`), but
    its bytes' CPU work (``cpu_s``) takes the same processor as the compute, so the step is
    at least the two together."""
    forward_s, backward_s = forward_backward_s(compute_s)
    return max(compute_s + cpu_s, forward_s + behind_backward_s(backward_s, ring_s))


def shared_cpu_s(host: Host, byte_cpu_s: float) -> float:
    """Seconds a shared host's cores spend on ``byte_cpu_s`` CPU seconds of a ring's bytes
    (as :meth:`Host.bytes_phase_s` counts them)."""
    return byte_cpu_s / host.cores if host.cores else byte_cpu_s / host.capacity


def ring_phase_terms(host: Host, ranks: int, rank_bytes: float, bandwidth: float,
                     ring_cost: float, collective: bool = False) -> tuple[float, float]:
    """(wire, CPU) seconds of a ring allreduce on a cluster of devices in which each of
    ``ranks`` ranks sends ``rank_bytes``: the bytes at ``bandwidth`` times the ring's measured
    wire factor (Gloo's, or ``collective`` TensorFlow's: :meth:`Host.wire_factor`) plus
    2 (ranks - 1) hop latencies, and their CPU work (``ring_cost`` per byte) at the device's
    pace."""
    return (ring_wire_s(host, ranks, rank_bytes, bandwidth, collective),
            host.on_device(ring_cost * rank_bytes))


def ring_wire_s(host: Host, ranks: int, rank_bytes: float, bandwidth: float,
                collective: bool = False) -> float:
    """A ring allreduce's wire term: each rank's ``rank_bytes`` at ``bandwidth`` times the
    ring's wire factor, plus 2 (ranks - 1) hop latencies."""
    return (host.wire_factor(collective) * rank_bytes / bandwidth
            + 2 * (ranks - 1) * host.message_s)


def device_bytes_phase(host: Host, wire_s: float, rank_bytes: float,
                       ring_cost: float | None = None, collective: bool = False) -> float:
    """A lockstep phase that only moves bytes on a cluster of devices: the wire and the
    busiest rank's CPU work on its device, the slower plus the part of the faster that does
    not hide behind it (the ring sends a chunk while it reduces the previous one, in part:
    the ring's measured share at this phase's wire / CPU ratio, :meth:`Host.overlap_at`,
    Gloo's or, ``collective``, TensorFlow's; all of it where not measured). ``rank_bytes``:
    what that rank sends, or half of what it sends and receives (``ring_cost``, default
    :attr:`Host.ring_cost`, is the CPU of both ends per byte sent)."""
    cost = host.ring_cost if ring_cost is None else ring_cost
    cpu_s = host.on_device(cost * rank_bytes)
    if min(wire_s, cpu_s) <= 0:
        return max(wire_s, cpu_s)
    hidden = host.overlap_at(wire_s / cpu_s, collective)
    hidden = 1.0 if hidden is None else hidden
    return max(wire_s, cpu_s) + (1.0 - hidden) * min(wire_s, cpu_s)
