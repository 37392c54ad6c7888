"""Where a cluster's tasks run, as the step-time model sees it (:mod:`lab.planner.ps_step`):
one host's shared cores (the simulated cluster with ``--device-cpus shared``) or a device per
task, and the CPU cost of moving bytes there, all measured (:mod:`ralp.planner.calibration`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import pairwise


def interpolate_log(points: tuple[tuple[float, float], ...], x: float) -> float:
    """The piecewise-linear curve through ``points`` ((x, y), ascending x > 0) in log x, at
    ``x``; the end's y beyond either end."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in pairwise(points):
        if x <= x1:
            share = math.log(x / x0) / math.log(x1 / x0) if x1 > x0 else 1.0
            return y0 + share * (y1 - y0)
    return points[-1][1]


@dataclass(frozen=True)
class Host:
    shared: bool  # True: every task shares one host's cores (the simulated cluster)
    cpu_s_per_byte: float = 0.0  # CPU time per byte sent and received (shared host only)
    message_s: float = 0.0  # fixed cost of one transfer (a variable's pull or push, a ring hop)
    # Shared host only: how many single-process steps it runs at once at full speed; the
    # shared CPU queue serves that fast. Measured with processes that train together in one
    # window (lab.planner.capacity), per workload: about 1 where one process already fills
    # the cores, less where big FC layers contend for memory.
    capacity: float = 1.0
    # The same measured at several process counts, ((processes, capacity), ...) ascending:
    # more processes than cores contend for caches and memory too. Empty: ``capacity`` for
    # any count of two or more.
    capacities: tuple[tuple[int, float], ...] = ()
    # Shared host only. The cores that serve the bytes' CPU time: ``cpu_s_per_byte`` and
    # ``ring_cpu_s_per_byte`` are CPU seconds (every thread of a transfer's processes, from
    # ``time.process_time``), which the tasks' many processes spread over all of them. None:
    # an older calibration whose per-byte cost was wall time, served like compute.
    cores: int | None = None
    # CPU time per byte crossing a link in Horovod's Gloo ring (fusion copies, sockets, the
    # sum), measured with the real library (lab.planner.allreduce); None: gRPC's is used.
    ring_cpu_s_per_byte: float | None = None
    # CPU time per byte crossing a link in TensorFlow's own ring (mode collective: gRPC
    # calls between the workers' servers), measured with the real strategy
    # (lab.planner.collective_cost); None: gRPC's transfer cost is used (its transport).
    collective_cpu_s_per_byte: float | None = None
    # A cluster of devices (``shared`` False): the CPUs each task's device has, where the CPU
    # work of its bytes runs beside its compute (a budgeted simulated device's budget, or
    # what a real node gives one task). None: not known, the bytes' CPU is not counted.
    device_cpus: float | None = None
    # A cluster of devices: the share of the smaller of a Gloo ring phase's wire time and its
    # CPU time (at the device's pace) that hides behind the larger, measured on two budgeted
    # devices (lab.planner.ring_overlap). None: not measured, all of it (the slower counts).
    ring_overlap: float | None = None
    # The same for TensorFlow's own ring (mode collective), measured alike.
    collective_overlap: float | None = None
    # Each ring's overlap measured at several wire / CPU ratios, ((ratio, overlap), ...)
    # ascending: the share hidden depends on which term is the larger and by how much. Empty:
    # only the single figure above (measured at a ratio of 1) is known.
    ring_overlaps: tuple[tuple[float, float], ...] = ()
    collective_overlaps: tuple[tuple[float, float], ...] = ()
    # A cluster of devices: how many times as long as its bytes take at the links' rate a
    # Gloo ring's wire term lasts (TCP and Ethernet headers, the ring's steps waiting on each
    # other, TCP's restart after a step's compute), measured with the overlap on two
    # budgeted devices, at a rate where the wire is the larger term (ralp.planner.
    # ring_overlap). None: not measured, the links' rate (a factor of 1).
    ring_wire_factor: float | None = None
    collective_wire_factor: float | None = None  # the same for TensorFlow's own ring
    # A cluster of devices: the CPU time one gRPC transfer of a variable costs beyond its
    # bytes, both ends (TensorFlow's rendezvous, a call each; lab.planner.transfer.
    # measure_message_cpu). None: not measured, no cost per transfer.
    cpu_s_per_message: float | None = None
    # A simulated cluster of devices: gRPC's CPU per byte (both ends, as ``cpu_s_per_byte``)
    # measured on the fabric between two budgeted devices, at several link rates,
    # ((rate bits/s, CPU s per byte), ...) ascending (lab.planner.fabric_transfer): a shaped
    # link delivers bytes at its pace, and the slower it is the more CPU a byte costs. Empty:
    # not measured, the loopback figure ``cpu_s_per_byte`` serves at every rate.
    fabric_cpu_s_per_byte: tuple[tuple[float, float], ...] = ()

    def on_device(self, cpu_s: float) -> float:
        """Seconds a device of a cluster of devices spends on ``cpu_s`` CPU seconds of byte
        work (its budget's pace); 0 where the devices' CPUs are not known (a real cluster's
        node is assumed to hide it in spare cores)."""
        return cpu_s / self.device_cpus if self.device_cpus else 0.0

    def grpc_cost(self, rate_bits: float) -> float:
        """gRPC's CPU seconds per byte (both ends) over links of ``rate_bits``: measured on
        the fabric (interpolated in log rate between the measured rates, the nearest beyond
        them), else the loopback probe's figure."""
        if not self.fabric_cpu_s_per_byte:
            return self.cpu_s_per_byte
        return interpolate_log(self.fabric_cpu_s_per_byte, rate_bits)

    def wire_factor(self, collective: bool = False) -> float:
        """Gloo's ring's measured wire factor (``collective``: TensorFlow's), 1 where not
        measured."""
        factor = self.collective_wire_factor if collective else self.ring_wire_factor
        return 1.0 if factor is None else factor

    def overlap_at(self, ratio: float, collective: bool = False) -> float | None:
        """The overlap of Gloo's ring (``collective``: TensorFlow's) for a phase whose wire
        takes ``ratio`` times its CPU time: interpolated in log ratio between the measured
        ratios (the nearest one beyond them), else the single measured figure, else None."""
        curve = self.collective_overlaps if collective else self.ring_overlaps
        if not curve:
            return self.collective_overlap if collective else self.ring_overlap
        return interpolate_log(curve, ratio)

    def capacity_at(self, processes: int) -> float:
        """Single-process steps the host runs at once with ``processes`` processes computing:
        1 alone; else the capacity measured at the largest count up to ``processes`` (the
        smallest measured count below it)."""
        if processes <= 1:
            return 1.0
        if not self.capacities:
            return self.capacity
        fitting = [c for n, c in self.capacities if n <= processes]
        return fitting[-1] if fitting else self.capacities[0][1]

    def speedups(self, processes: int) -> tuple[float, ...]:
        """``capacity_at`` for 1 .. ``processes`` (a load-dependent station's speedup)."""
        return tuple(self.capacity_at(n) for n in range(1, max(1, processes) + 1))

    def together_s(self, compute_s: float, processes: int) -> float:
        """Time ``processes`` processes take for ``compute_s`` of single-process compute in
        all, alone on the shared host: one runs at its own speed, several at
        :meth:`capacity_at` their count."""
        return compute_s / self.capacity_at(processes)

    def bytes_phase_s(self, wire_s: float, byte_cpu_s: float) -> float:
        """A phase that only moves bytes (a Horovod collective's, timed alone: what runs
        beside it is the step models' business) on a shared host: the wire and the CPU work of
        its bytes pipeline (Gloo sends a chunk while it reduces the previous one), so the
        slower of the two counts.
        An older calibration (no ``cores``) keeps the earlier rule: they add."""
        if not self.cores:
            return wire_s + byte_cpu_s / self.capacity
        return max(wire_s, byte_cpu_s / self.cores)

    @property
    def ring_cost(self) -> float:
        """CPU seconds per byte of a Horovod ring's traffic."""
        return self.cpu_s_per_byte if self.ring_cpu_s_per_byte is None else self.ring_cpu_s_per_byte

    @property
    def collective_cost(self) -> float:
        """CPU seconds per byte of TensorFlow's own ring's traffic."""
        if self.collective_cpu_s_per_byte is None:
            return self.cpu_s_per_byte
        return self.collective_cpu_s_per_byte


# Each ring's measured terms, which are measured together (lab.planner.ring_overlap): its
# wire factor, its overlap figure and its curve.
RING_FIELDS = {"horovod": ("ring_wire_factor", "ring_overlap", "ring_overlaps"),
               "collective": ("collective_wire_factor", "collective_overlap",
                              "collective_overlaps")}
OVERLAP_FIELDS = tuple(name for fields in RING_FIELDS.values() for name in fields)
RING_COSTS = {"horovod": "ring_cpu_s_per_byte", "collective": "collective_cpu_s_per_byte"}


def with_overlaps(host: Host, measured: Host) -> Host:
    """``host`` with ``measured``'s rings' terms where it has none of its own: each ring's
    overlap figure and its curve over wire / CPU ratios (which the model prefers to the
    figure). Where ``measured`` has a ring's wire factor and ``host`` has not, all of that
    ring's terms come from ``measured``, its CPU cost per byte included: the factor and the
    overlap are found together against that cost, so ``host``'s own (found against a factor
    of 1, or with one tensor a probe) do not pair with them. A gRPC transfer's CPU cost
    beyond its bytes is lent alike where ``host`` predates its probe (CPU seconds: the same
    on any budget of one host), and so is gRPC's CPU per byte on the fabric."""
    lent = {}
    if host.cpu_s_per_message is None and measured.cpu_s_per_message is not None:
        lent["cpu_s_per_message"] = measured.cpu_s_per_message
    if not host.fabric_cpu_s_per_byte and measured.fabric_cpu_s_per_byte:
        lent["fabric_cpu_s_per_byte"] = measured.fabric_cpu_s_per_byte
    for ring, (factor, *overlaps) in RING_FIELDS.items():
        if getattr(measured, factor) is not None and getattr(host, factor) is None:
            cost = RING_COSTS[ring]
            paired = (factor, *overlaps) + ((cost,) if getattr(measured, cost) else ())
            lent.update({name: getattr(measured, name) for name in paired})
        else:
            lent.update({name: getattr(measured, name) for name in overlaps
                         if getattr(host, name) in (None, ())})
    return replace(host, **lent)
