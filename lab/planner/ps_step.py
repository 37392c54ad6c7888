"""Step time of the PS modes (plain PS, RALP) and the queueing network under them: small
pure functions of measured inputs (no TensorFlow). The allreduce modes' step is in
:mod:`lab.planner.ring_step`, Stanza's in :mod:`lab.planner.stanza_step`.

Units: seconds, bytes, bytes per second. A *step* is one batch on every worker, as in the
byte model; throughput = workers x batch / step time.

Inputs:

- :class:`Compute`: from the calibration, one worker batch through the whole model
  (forward + backward + update) and through the tail (the layers RALP offloads), measured in one
  process on the calibrating host.
- :class:`Host`: where the tasks run. ``shared`` (the simulated netns cluster: every task on
  this machine's cores) makes all compute, and the CPU cost of moving bytes through gRPC/Gloo,
  queue for one CPU; a real cluster (``shared=False``) gives each task its own device.
- :class:`Links`: the byte model's bytes per step on every PS link (each direction), per
  worker link, and in total (:func:`ralp.profiler.bytes_model.mode_traffic`).

PS modes run asynchronously (ClusterCoordinator hands a step to whichever worker is idle), so
their step time comes from a closed queueing network solved exactly by mean-value analysis
(:func:`mva_cycle_time`): each worker cycles through the stations once per batch. At one worker
the terms add (no overlap); with many workers the busiest station bounds the step (full
overlap). On devices, where the worker's layers are known, the layer pipeline
(:mod:`lab.planner.layer_pipeline`) gives a worker's step alone, and the workers queue beyond it
(two on one PS task where turns fit: half the waits, :func:`_step_with_queueing`); inside an
epoch's first cycles plain PS's workers move in step, the pipeline of them all
(``Links.in_step``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.planner.host import Host
from lab.planner.layer_pipeline import lockstep_step_s
from ralp.planner.terms import Compute, Links


@dataclass(frozen=True)
class Station:
    name: str
    demand_s: float  # service time per worker batch (one customer served alone)
    queue: bool  # True: one server shared by all workers; False: each worker has its own
    # Load-dependent queue (the shared host's CPU): how many times as fast as alone it serves
    # with j customers present, ``speedup[min(j, len) - 1]``. Empty: load-independent.
    speedup: tuple[float, ...] = ()

    def rate(self, customers: int) -> float:
        return self.speedup[min(customers, len(self.speedup)) - 1] if self.speedup else 1.0


def mva_cycle_time(stations: list[Station], customers: int, base_s: float | None = None) -> float:
    """Exact mean-value analysis of a closed single-class network: the mean time one
    customer (a worker) takes for one cycle (one batch) with ``customers`` in the network.
    Load-dependent stations (``speedup``) follow Reiser and Lavenberg's algorithm, carrying
    their marginal queue-length probabilities from one population to the next.

    ``base_s``: one customer's cycle alone, where it is not the stations' demands summed (a
    worker's step alone on devices, whose transfers overlap its compute); the rest of the
    cycle is a delay, and a customer's cycle is ``base_s`` plus its waits at the queues.

    Assumption: product form (processor-sharing / exponential FCFS service). Exact at one
    customer (sum of demands) and in the limit (busiest station x customers).
    """
    base = sum(s.demand_s for s in stations) if base_s is None else base_s
    queue = [0.0] * len(stations)
    marginal = [[1.0] for _ in stations]  # P(j customers at the station | n - 1 in all)
    cycle = base
    for n in range(1, customers + 1):
        waits = []  # beyond each station's demand
        for s, q, p in zip(stations, queue, marginal, strict=True):
            if s.speedup:
                waits.append(sum(j * s.demand_s / s.rate(j) * p[j - 1] for j in range(1, n + 1))
                             - s.demand_s)
            else:
                waits.append(s.demand_s * q if s.queue else 0.0)
        cycle = base + sum(waits)
        throughput = n / cycle if cycle > 0 else float("inf")
        queue = [throughput * (s.demand_s + w) for s, w in zip(stations, waits, strict=True)]
        for i, s in enumerate(stations):
            if s.speedup:
                p = [0.0] + [s.demand_s / s.rate(j) * throughput * marginal[i][j - 1]
                             for j in range(1, n + 1)]
                p[0] = max(0.0, 1.0 - sum(p[1:]))
                marginal[i] = p
    return cycle


def _link_stations(links: Links, workers: int, bandwidth: float, *,
                   duplex: bool) -> list[Station]:
    """The PS links' queues, demand per worker batch at ``bandwidth``.

    A worker's transfers to every PS task run at once (a step reads and writes every variable
    concurrently), so the PS links are served in parallel and the busiest one is the station
    (the others wait less; not modelled). Its two directions:

    - ``duplex=True`` (every PS mode on devices or a real cluster): they overlap, a queue
      each: one worker's pulls cross while another's pushes do, as a full-duplex link (the
      simulated fabric's veth pairs included) carries both directions at once.
    - ``duplex=False`` (plain PS on a shared host, as that model was validated): one queue of
      both directions' bytes; there a step's transfers wait for the one CPU as well.

    Worker links carry the same bytes at the other end of each transfer, uncontended, so
    they add no station of their own."""
    if duplex:
        return [Station("busiest PS link in", max(links.ps_rx) / workers / bandwidth, True),
                Station("busiest PS link out", max(links.ps_tx) / workers / bandwidth, True)]
    both = max(tx + rx for tx, rx in zip(links.ps_tx, links.ps_rx, strict=True))
    return [Station("busiest PS link", both / workers / bandwidth, True)]


def _transfer_cpu_s(links: Links, workers: int, host: Host) -> float:
    """CPU time per worker batch for moving bytes (gRPC serialisation, copies, the kernel's
    veth path): a cost only when it competes with compute on one host. On a real cluster it
    is assumed hidden in each node's spare cores (an assumption)."""
    if not host.shared:
        return 0.0
    # Per-transfer latency (message_s) is not CPU time: a step's variable reads and writes
    # are concurrent RPCs whose latencies overlap, so only the bytes cost the host.
    return host.cpu_s_per_byte * links.total / workers


def _shared_cpu(compute_s: float, links: Links, workers: int, host: Host) -> Station:
    """The one CPU queue of a shared host, load-dependent: one batch alone is computed at one
    process's speed, j batches at once at :meth:`Host.capacity_at` j. Its demand is a batch's
    compute and its bytes' CPU time, scaled so that a saturated host (every worker's batch at
    the CPU) takes ``compute / capacity + bytes' CPU / cores`` per batch (the bytes' CPU
    spreads over every core; an older calibration without ``cores`` serves it like compute)."""
    byte_cpu = _transfer_cpu_s(links, workers, host)
    share = host.capacity_at(workers) / host.cores if host.cores else 1.0
    return Station("compute (one shared host)", compute_s + byte_cpu * share, True,
                   host.speedups(workers))


def _grpc_end_s(host: Host, nbytes: float, transfers: float, bandwidth: float) -> float:
    """One end's share of gRPC's CPU for ``nbytes`` in ``transfers`` transfers over links of
    ``bandwidth`` bytes/s (:meth:`Host.grpc_cost` and ``cpu_s_per_message`` count both
    ends), on its device."""
    per_transfer = host.cpu_s_per_message or 0.0
    return host.on_device((host.grpc_cost(8 * bandwidth) * nbytes + per_transfer * transfers) / 2)


def _ps_device_stations(links: Links, workers: int, host: Host, work_s: float,
                        bandwidth: float, ps_work_s: float = 0.0) -> list[Station]:
    """A cluster of devices' CPU stations of a PS mode, per worker batch: each worker's
    device (a delay: ``work_s`` and its end of every transfer) and the busiest PS task's (a
    queue: ``ps_work_s``, such as RALP's tail in the critical section, and its end of every
    transfer: on a budgeted device its gRPC work and its compute take turns on one budget).
    The variables lie round-robin over the PS tasks, so each takes an equal share of a
    batch's transfers (``links.messages``); RALP's one PS takes them all. gRPC's CPU per byte
    is the fabric's at the links' rate where measured (:meth:`Host.grpc_cost`).
    """
    ps_bytes = max((tx + rx for tx, rx in zip(links.ps_tx, links.ps_rx, strict=True)), default=0)
    ps_transfers = links.messages / max(1, len(links.ps_tx))
    worker = Station("worker device", work_s + _grpc_end_s(host, links.total / workers,
                                                           links.messages, bandwidth), False)
    ps = Station("busiest PS device",
                 ps_work_s + _grpc_end_s(host, ps_bytes / workers, ps_transfers, bandwidth), True)
    return [worker, ps]


def ps_step_time(compute: Compute, links: Links, workers: int, bandwidth: float,
                 host: Host) -> float:
    """Plain PS (ParameterServerStrategy): each worker pulls every variable from its PS task
    (round-robin placement, so ps:0 carries the most: the byte model's ``ps_tx``/``ps_rx``),
    runs the whole model, and pushes every gradient. Stations per batch: the worker's compute
    (one shared CPU queue on a shared host, else a per-worker delay) and the busiest PS
    link, its two directions a queue each (in turn on a shared host: :func:`_link_stations`).
    Assumption: the PS's own update work is part of ``compute.full_s``.

    On devices, where the worker's layers are known (``links.layers``), a worker's step alone
    is its layer pipeline (:mod:`lab.planner.layer_pipeline`) and the workers queue beyond it
    (:func:`_step_with_queueing`). Inside an epoch's first cycles (``links.in_step``) the workers
    move in step instead: the step is the pipeline of all of them, or a worker device's CPU
    or the busiest PS device's CPU for all workers' batches, whichever is longest."""
    if host.shared:
        cpu = [_shared_cpu(compute.full_s, links, workers, host)]
    else:
        cpu = _ps_device_stations(links, workers, host, compute.full_s, bandwidth)
        if links.layers:
            worker, ps = cpu
            rates = _grpc_rates(host, bandwidth)
            if links.in_step:
                pipeline = lockstep_step_s(links.layers, compute.full_s, workers, bandwidth,
                                         cpu_rates=rates)
                return max(pipeline, worker.demand_s, workers * ps.demand_s)
            alone = max(lockstep_step_s(links.layers, compute.full_s, 1, bandwidth,
                                      cpu_rates=rates), worker.demand_s)
            shared = [*_link_stations(links, workers, bandwidth, duplex=True), ps]
            return _step_with_queueing(alone, shared, links, workers)
    stations = [*cpu, *_link_stations(links, workers, bandwidth, duplex=not host.shared)]
    return mva_cycle_time(stations, workers)


def ralp_step_time(compute: Compute, links: Links, workers: int, bandwidth: float,
                   host: Host) -> float:
    """RALP (one PS): a worker runs the head, sends the boundary activations, the PS runs the
    tail inside a critical section (one worker's batch at a time), returns the boundary
    gradient, and the worker finishes the head. Stations per batch: the head on the worker
    (a delay; on a shared host it queues for the one CPU together with the tail), the PS's
    critical section (a queue of ``tail_s``: the tail is serialised), and the PS link's two
    directions, a queue each (activations in, boundary gradients out, plus the kept
    variables: :func:`_link_stations`). On devices with the worker's layers known, a worker's
    step alone is :func:`_ralp_alone_s` (or its device's CPU if longer) and the workers queue
    beyond it (:func:`_step_with_queueing`; inside an epoch's first cycles, ``links.in_step``,
    they do not take turns)."""
    stations = _link_stations(links, workers, bandwidth, duplex=True)
    if host.shared:
        stations.append(_shared_cpu(compute.full_s, links, workers, host))
    else:  # the PS's device runs every tail (its critical section) and its end of the bytes
        worker, ps = _ps_device_stations(links, workers, host, compute.head_s, bandwidth,
                                         compute.tail_s)
        if links.layers:
            alone = max(_ralp_alone_s(compute, links, workers, bandwidth, host), worker.demand_s)
            return _step_with_queueing(alone, [*stations, ps], links, workers)
        stations += [worker, ps]
    return mva_cycle_time(stations, workers)


def _step_with_queueing(alone_s: float, shared: list[Station], links: Links, workers: int) -> float:
    """A PS-mode step on devices from a worker's step alone (``alone_s``) and the stations
    its workers share (the PS links' two directions, the busiest PS device).

    - The workers meet at random: the step alone plus the waits at the shared stations that
      mean-value analysis gives (:func:`_waits_s`). Three workers on one PS task (RALP-N at
      N = 4) and plain PS's two workers on two tasks did not take turns.
    - **Two workers on one PS task**, where turns fit (twice the busiest shared station's
      demand within a step alone), are bistable: in some runs they take turns, one pulling
      while the other computes or pushes, and each steps as alone; in others they meet at
      random. Neither state can be told in advance (it is not the mode's: where the turns
      barely fit, runs of one mode land in either), so the step is alone plus half the
      waits.

    Inside an epoch's first cycles (``links.in_step``) no one takes turns."""
    waits = _waits_s(shared, alone_s, workers)
    if (workers == 2 and len(links.ps_tx) == 1 and not links.in_step
            and 2 * max(station.demand_s for station in shared) <= alone_s):
        return alone_s + waits / 2
    return alone_s + waits


def _waits_s(shared: list[Station], alone_s: float, customers: int) -> float:
    """The time a customer waits per cycle at the ``shared`` queues (beyond their demands)
    when each one's cycle is ``alone_s`` plus its waits (:func:`mva_cycle_time` with that
    base). Where the stations' demands fit in the step alone, that is the queueing network
    with the worker's delay set to what the step alone leaves beyond them; where they do not
    (a worker's pushes overlap its backward, so its step alone is shorter than their sum),
    one customer still waits nothing."""
    return mva_cycle_time(shared, customers, base_s=alone_s) - alone_s


def _ralp_alone_s(compute: Compute, links: Links, workers: int, bandwidth: float,
                  host: Host) -> float:
    """A RALP worker's step alone: its head's pipeline with the exchange with the tail (the
    boundary's bytes both ways at the link's rate, and the tail) between its forward and its
    backward (:func:`lockstep_step_s` for one worker).

    With the worker's delay set to what this leaves beyond the shared stations (the PS
    link's two directions and the PS device), the queueing network at one worker gives this
    step. The gRPC CPU of both ends overlaps the wire in it (a transfer's serialisation
    streams while its bytes cross) rather than adding to it; the exchange's bytes cross no
    faster than the ends' CPU serves them, as the variables' do."""
    kept = sum(nbytes for layer in links.layers for _, nbytes in layer.variables)
    bytes_in, bytes_out = max(links.ps_rx) / workers, max(links.ps_tx) / workers
    rates = _grpc_rates(host, bandwidth)
    exchange_s = ((max(0.0, bytes_in - kept) + max(0.0, bytes_out - kept))
                  / min(bandwidth, *rates))
    return lockstep_step_s(links.layers, compute.head_s, 1, bandwidth,
                         between_s=exchange_s + compute.tail_s, cpu_rates=rates)


def _grpc_rates(host: Host, bandwidth: float) -> tuple[float, float]:
    """The bytes/s gRPC moves with all of a worker's device and of a PS task's (each end
    pays half of :meth:`Host.grpc_cost`, at its device's pace); unbounded where the devices'
    CPUs are not known."""
    per_byte = _grpc_end_s(host, 1.0, 0, bandwidth)
    rate = 1.0 / per_byte if per_byte > 0 else float("inf")
    return rate, rate


def images_per_sec(workers: int, batch_size: int, step_time_s: float) -> float:
    return workers * batch_size / step_time_s
