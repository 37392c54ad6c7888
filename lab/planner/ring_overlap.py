"""How much of a ring allreduce's CPU work hides behind its wire on a budgeted device.

A ring allreduce moves bytes (the wire) and spends CPU on them (Gloo's fusion copies, the
kernel's socket path, the sum: :mod:`lab.planner.allreduce`). Where a device's CPU is scarce
both take time, and the phase lies between the slower of the two (a perfect pipeline: each
chunk is summed while the next crosses) and their sum (no pipeline). The budgeted zoo's Horovod
records fell in between: their ring phase took the wire plus 0.39-0.82 of the ring's CPU time.

This probe measures where it falls, apart from any record: two ranks (Horovod's, or two
``MultiWorkerMirroredStrategy`` workers for TensorFlow's own ring), each on a
budgeted device (a network namespace and a control group of the bench's budget), joined by
links shaped at a rate where the wire takes ``ratio`` times as long as the CPU, all-reduce one
tensor several times. The overlap may depend on that ratio, so a calibration can measure it
at several (``--overlap-ratios``, about 30 s each; :data:`OVERLAP_RATIOS` by default) and the
model then reads it at each phase's own ratio (:meth:`lab.planner.host.Host.overlap_at`).
With ``phase`` the median wall
time of one allreduce, ``wire`` a rank's bytes over the rate plus the ring's hop latencies and
``cpu`` the calibrated ring cost of those bytes at the device's pace (the model's own terms,
:func:`lab.planner.ring_step.ring_phase_terms`), the overlap is the share of the smaller term that
hid behind the larger:

    overlap = (wire + cpu - phase) / min(wire, cpu), within [0, 1]

so that the model's phase, ``max + (1 - overlap) min``, is the one measured at that rate.

A ring's wire also takes longer than its bytes at the links' rate: TCP's and Ethernet's
headers, the ring's steps waiting on each other, and TCP's slow restart after the idle of a
step's compute, well beyond what the CPU explains. So a second probe runs where the wire is the larger term (:data:`WIRE_RATIO`)
with a tensor of a step's size, and the wire factor is the one that, with the overlap, gives
the phase measured at both probes (:func:`solve_wire_factor`). Gloo's probes idle
:data:`GAP_S` before each timed allreduce, as a training step computes between them.

Run as a module (``horovod|collective TENSOR_BYTES REPEATS GAP_S``), it is one rank of that
measurement; rank 0 sends the figures as its record.
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass, replace

from lab.planner.allreduce import grouped_allreduce, timed_allreduces
from lab.planner.host import RING_COSTS, RING_FIELDS
from ralp._compat import exit_without_teardown
from ralp.errors import RalpError

PHASE_TARGET_S = 0.15  # the wire time of one allreduce at an overlap probe's rate
# The wire factor's probe: a rate where the wire takes WIRE_RATIO times as long as the CPU
# (the budgeted zoo's rings ran at 4-5 at 1 Gbit/s) and a tensor of about a training step's
# allreduce (the zoo's took 1.2-1.9 s on the wire)
WIRE_RATIO = 5.0
WIRE_PHASE_S = 1.0
# Idle before each timed allreduce of Gloo's probes, as a step computes between its
# allreduces: longer than TCP's least retransmission timeout (200 ms), after which a
# connection restarts slowly
GAP_S = 0.5
# The rings whose wire factor is measured: Gloo's. TensorFlow's ring keeps the single
# overlap probe back to back (its wire factor does not repeat from one run to the next, so a
# measured one would add noise rather than a term)
WIRE_FACTOR_LIBRARIES = ("horovod",)
# wire / CPU ratios a calibration measures the overlap at (``--overlap-ratios``): one, where
# the overlap changes the phase most; a curve over several ratios is opt-in
OVERLAP_RATIOS = (1.0,)
MIN_TENSOR_BYTES = 1024**2
MAX_TENSOR_BYTES = 256 * 1024**2
MIN_RATE_BITS, MAX_RATE_BITS = 10**8, 2 * 10**10
REPEATS = 7
RANKS = 2
PROBE_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class RingOverlap:
    overlap: float  # the share of min(wire, cpu) hidden behind the larger, 0..1
    rate_bits: int  # the links' rate the probe ran at, bits/s
    tensor_bytes: int
    phase_s: float  # median wall time of one allreduce
    phase_range_s: tuple[float, float]
    wire_s: float  # the model's wire term at that rate (bytes x wire factor, hop latencies)
    cpu_s: float  # the model's CPU term (calibrated ring cost, at the device's pace)
    rank_cpu_s: tuple[float, ...]  # each rank's own CPU per allreduce (process time), for the reader
    bytes_s: float = 0.0  # a rank's bytes at the links' rate (the wire term's share it scales)

    def against(self, wire_factor: float) -> RingOverlap:
        """This measurement read against a ring's ``wire_factor``: its wire term and overlap
        with the bytes' time scaled by it."""
        wire_s = self.wire_s + (wire_factor - 1.0) * self.bytes_s
        return replace(self, wire_s=wire_s, overlap=overlap_of(self.phase_s, wire_s, self.cpu_s))

    @property
    def ratio(self) -> float:
        """The phase's wire time over its CPU time, as run."""
        return self.wire_s / self.cpu_s if self.cpu_s > 0 else float("inf")


def probe_shape(ring_cpu_s_per_byte: float, device_cpus: float, ratio: float = 1.0,
                phase_s: float = PHASE_TARGET_S) -> tuple[int, int]:
    """(rate in bits/s, tensor bytes) of the probe: the rate at which a rank's bytes take
    ``ratio`` times as long on the wire as their CPU work on a device of ``device_cpus``, and
    a tensor whose wire time there is about ``phase_s`` (a rank of two sends the tensor's
    size)."""
    if ratio <= 0:
        raise ValueError(f"a wire / CPU ratio is positive, got {ratio}")
    rate = (device_cpus / (ring_cpu_s_per_byte * ratio) if ring_cpu_s_per_byte > 0
            else MAX_RATE_BITS / 8)
    rate_bits = int(min(MAX_RATE_BITS, max(MIN_RATE_BITS, rate * 8)))
    tensor = int(min(MAX_TENSOR_BYTES, max(MIN_TENSOR_BYTES, rate_bits / 8 * phase_s)))
    return rate_bits, tensor - tensor % 4


def overlap_of(phase_s: float, wire_s: float, cpu_s: float) -> float:
    """The share of the smaller of ``wire_s`` and ``cpu_s`` that a phase of ``phase_s`` hid
    behind the larger, within [0, 1] (1 where the smaller is zero)."""
    smaller = min(wire_s, cpu_s)
    if smaller <= 0:
        return 1.0
    return min(1.0, max(0.0, (wire_s + cpu_s - phase_s) / smaller))


LIBRARIES = ("horovod", "collective")  # Gloo's ring (Horovod, Stanza) and TensorFlow's own


def measure_overlap_curve(host, budget, library: str = "horovod",
                          ratios: tuple[float, ...] = OVERLAP_RATIOS) -> list[RingOverlap]:
    """:func:`measure_ring_overlap` at each wire / CPU ratio of ``ratios``, in that order.

    Raises:
        RalpError: a probe could not run (the message says why, and at which ratio).
    """
    curve = []
    for ratio in ratios:
        try:
            curve.append(measure_ring_overlap(host, budget, library, ratio))
        except RalpError as e:
            raise RalpError(f"at a wire/CPU ratio of {ratio:.3g}: {e}") from None
    return curve


def measure_ring_overlap(host, budget, library: str = "horovod", ratio: float = 1.0,
                         phase_s: float = PHASE_TARGET_S) -> RingOverlap:
    """Measure the overlap of ``library``'s ring (``horovod``: Gloo; ``collective``:
    TensorFlow's, ``MultiWorkerMirroredStrategy``) on two devices of ``budget`` (a
    :class:`ralp.emulation.budget.Budget` with control groups), for ``host``'s calibrated cost
    per byte of that ring and hop latency (:class:`lab.planner.ps_step.Host`), over links
    shaped so that the wire takes ``ratio`` times the CPU's time, with a tensor of about
    ``phase_s`` on the wire, each allreduce after :data:`GAP_S` idle for the rings whose wire
    factor is measured (back to back for the others). Read against a wire factor of 1
    (:meth:`RingOverlap.against` reads it against another). Needs root (namespaces, control
    groups), and Horovod for its ring.

    Raises:
        RalpError: the probe could not run (the message says why).
    """
    from lab.planner.ring_step import ring_phase_terms
    from ralp.emulation.budget import budget_for

    if library not in LIBRARIES:
        raise RalpError(f"no ring {library!r}: one of {', '.join(LIBRARIES)}")
    if budget.hierarchy is None or budget.cpus is None:
        raise RalpError("the ring overlap is measured on budgeted devices: this host gives "
                        f"none ({budget.describe()})")
    measured = getattr(host, RING_COSTS[library])
    if not measured:
        raise RalpError(f"the {library} ring's overlap needs its calibrated cost per byte")
    rate_bits, tensor = probe_shape(measured, budget.cpus, ratio, phase_s)
    gap_s = GAP_S if library in WIRE_FACTOR_LIBRARIES else 0.0
    record = _launch(library, tensor, rate_bits, budget_for(budget.cpus, RANKS), gap_s)
    rank_bytes = tensor * 2 * (RANKS - 1) / RANKS  # what each rank of the ring sends
    plain = replace(host, **{RING_FIELDS[library][0]: None})  # a wire factor of 1
    wire_s, cpu_s = ring_phase_terms(plain, RANKS, rank_bytes, rate_bits / 8, measured,
                                     library == "collective")
    phase = float(record["phase_s"])
    return RingOverlap(overlap_of(phase, wire_s, cpu_s), rate_bits, tensor, phase,
                       tuple(record["phase_range_s"]), wire_s, cpu_s,
                       tuple(record["rank_cpu_s"]), rank_bytes / (rate_bits / 8))


@dataclass(frozen=True)
class RingMeasure:
    # the ring's wire term over its bytes' time at the links' rate, >= 1; None: not measured
    # (TensorFlow's ring: :data:`WIRE_FACTOR_LIBRARIES`)
    wire_factor: float | None
    curve: tuple[RingOverlap, ...]  # the overlap probes read against ``wire_factor``


def nearest_even(curve):
    """The point of ``curve`` (items with a ``ratio``, or (ratio, overlap) pairs) whose wire /
    CPU ratio is nearest 1, in log ratio."""
    def distance(point) -> float:
        ratio = point[0] if isinstance(point, tuple) else point.ratio
        return abs(math.log(ratio)) if ratio > 0 else math.inf

    return min(curve, key=distance)


def solve_wire_factor(bound: RingOverlap, even: RingOverlap) -> float:
    """The wire factor f for which the model's phase, ``f x bytes + hops + (1 - overlap) x
    cpu`` (the wire the larger term), is the one measured at both the wire-bound probe and
    the one nearest a ratio of 1: two equations in f and the overlap (the probes read against
    a factor of 1). At least 1, as the links' shaping caps their rate."""
    hops = (bound.wire_s - bound.bytes_s, even.wire_s - even.bytes_s)
    det = bound.bytes_s * even.cpu_s - even.bytes_s * bound.cpu_s
    if det <= 0:  # the probes' ratios too close to tell the terms apart
        return 1.0
    factor = ((bound.phase_s - hops[0]) * even.cpu_s - (even.phase_s - hops[1]) * bound.cpu_s) / det
    return max(1.0, factor)


def measure_ring(host, budget, library: str = "horovod",
                 ratios: tuple[float, ...] = OVERLAP_RATIOS) -> RingMeasure:
    """``library``'s ring on two devices of ``budget``: one probe where the wire is the larger
    term (:data:`WIRE_RATIO`, a tensor of about :data:`WIRE_PHASE_S`) and one at each ratio of
    ``ratios`` (:func:`measure_overlap_curve`); the wire factor that both agree on
    (:func:`solve_wire_factor`, against the probe nearest a ratio of 1) and the overlaps read
    against it. ``host``'s own wire factors are not used (the probes measure them). A ring
    not in :data:`WIRE_FACTOR_LIBRARIES` gets only its overlaps, back to back.

    Raises:
        RalpError: a probe could not run (the message says why).
    """
    if library not in WIRE_FACTOR_LIBRARIES:
        return RingMeasure(None, tuple(measure_overlap_curve(host, budget, library, ratios)))
    try:
        bound = measure_ring_overlap(host, budget, library, WIRE_RATIO, WIRE_PHASE_S)
    except RalpError as e:
        raise RalpError(f"the wire-bound probe: {e}") from None
    curve = measure_overlap_curve(host, budget, library, ratios)
    factor = solve_wire_factor(bound, nearest_even(curve))
    return RingMeasure(factor, tuple(p.against(factor) for p in curve))


def _launch(library: str, tensor: int, rate_bits: int, pair, gap_s: float) -> dict:
    """Two ranks of ``library`` on devices of ``pair``'s budget, at ``rate_bits``: rank 0's
    record."""
    command = [sys.executable, "-m", "lab.planner.ring_overlap", library, str(tensor),
               str(REPEATS), str(gap_s)]
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "-1"}
    if library == "horovod":
        from ralp.horovod.launch import launch
    else:
        from ralp.collective.launch import launch
    return launch(lambda links, meter: command, RANKS, "netns", bandwidth=f"{rate_bits}bit",
                  budget=pair, timeout=PROBE_TIMEOUT_S, env=env)


def _record(walls: list[float], every_cpu) -> dict:
    return {"phase_s": statistics.median(walls), "phase_range_s": [min(walls), max(walls)],
            "rank_cpu_s": [float(c) for c in every_cpu]}


def _horovod_rank(tensor_bytes: int, repeats: int, gap_s: float) -> None:
    from ralp._messages import emit
    from ralp.emulation.devices import join_rank_group

    join_rank_group()  # first: the rank's work runs inside its device's budget
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    # as the trainers do: many tensors in one grouped allreduce (Horovod fuses them), averaged
    walls, cpus = timed_allreduces(grouped_allreduce(tensor_bytes), repeats, gap_s)
    every = hvd.allgather(tf.constant([statistics.median(cpus)], tf.float64)).numpy()
    if hvd.rank() == 0:
        emit("record", _record(walls, every))
    hvd.shutdown()


def _collective_worker(tensor_bytes: int, repeats: int, gap_s: float) -> None:
    """A worker of TensorFlow's ring (its launcher started it in its device's group)."""
    from lab.planner.collective_cost import sum_all_reduce
    from ralp._messages import emit
    from ralp.collective.runtime import leave_together, make_strategy

    strategy = make_strategy()
    import tensorflow as tf

    all_reduce = sum_all_reduce(strategy)
    tensor = tf.ones([tensor_bytes // 4], tf.float32)
    walls, cpus = timed_allreduces(lambda: all_reduce(tensor).numpy(), repeats, gap_s)
    rank = int(strategy.cluster_resolver.task_id or 0)
    mine = tf.one_hot(rank, RANKS, on_value=statistics.median(cpus), dtype=tf.float64)
    every = all_reduce(mine).numpy()  # each worker's CPU in its own slot
    if rank == 0:
        emit("record", _record(walls, every))
    leave_together(rank, RANKS)
    exit_without_teardown()  # TensorFlow's collective server cannot stop cleanly


if __name__ == "__main__":
    rank_main = _horovod_rank if sys.argv[1] == "horovod" else _collective_worker
    rank_main(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
