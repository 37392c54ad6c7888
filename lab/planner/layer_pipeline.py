"""A PS-mode worker's step on a cluster of devices as a pipeline of its layers: alone (the base
of every PS mode's step past an epoch's first cycles: :func:`lab.planner.ps_step._step_with_queueing`)
or, inside those cycles, with plain PS's workers in step.

Two things the queueing network (:func:`lab.planner.ps_step.mva_cycle_time`) cannot see, both
in every task's link and CPU traces:

- **The workers move in step** (an epoch's first cycles). An epoch hands every worker a step
  at once and nothing in plain PS serializes them (RALP's critical section does), so they
  pull together, compute together and push together. Each PS link's bytes then cross in
  turns: all the pulls, then all the pushes, every worker getting a W-th of the link.
- **A worker's pushes overlap its backward, its pulls nothing.** A step reads every variable
  at once, and its forward starts when the last read is in (while a worker's link receives,
  its CPU mostly waits on gRPC's receive). A layer's gradient is pushed as soon as its
  backward is done.

So one worker of W in step is simulated: its pulls start together and share links max-min
fairly (each PS link at a W-th of its rate, the worker's own link at all of it), the forward
starts when they are all in, the backward runs the layers in reverse and releases each
layer's pushes. A layer's compute is its share
of the model's forward FLOPs times the measured step; the backward costs twice the forward
(about 2N of a network's 6N FLOPs per example are forward, 4N backward: Kaplan et al.,
"Scaling Laws for Neural Language Models", 2020, section 2.1).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from lab.planner.device_workload import Layer
from ralp.planner.terms import BACKWARD_RATIO


@dataclass(frozen=True)
class Transfer:
    key: Hashable
    links: tuple[Hashable, ...]  # every link it crosses, each a capacity in bytes/s
    nbytes: float
    start_s: float = 0.0


def max_min_rates(flows: Mapping[Hashable, Sequence[Hashable]],
                  capacity: Mapping[Hashable, float],
                  counts: Mapping[Hashable, int] | None = None) -> dict[Hashable, float]:
    """Max-min fair rates of ``flows`` (each the links it crosses) over links of
    ``capacity``: progressive filling, the most contended link fixing its flows' rates first
    (Bertsekas and Gallager, "Data Networks", 2nd ed., section 6.5.2). ``counts``: how many
    identical flows each entry stands for (1 where not given); the rate is each one's."""
    count = {flow: (counts or {}).get(flow, 1) for flow in flows}
    rate: dict[Hashable, float] = {}
    left = dict(capacity)
    active = set(flows)
    while active:
        users: dict[Hashable, list[Hashable]] = {}
        for flow in active:
            for link in flows[flow]:
                users.setdefault(link, []).append(flow)
        load = {link: sum(count[flow] for flow in on) for link, on in users.items()}
        link = min(users, key=lambda name: left[name] / load[name])
        share = max(0.0, left[link] / load[link])
        for flow in users[link]:
            rate[flow] = share
            for crossed in flows[flow]:
                left[crossed] -= share * count[flow]
            active.discard(flow)
    return rate


def finish_times(transfers: Sequence[Transfer], capacity: Mapping[Hashable, float]) -> dict:
    """When each transfer is done, all of them sharing the links max-min fairly as a fluid
    from their start times on.

    Transfers crossing the same links get the same rate, so they are kept as one class per
    path: a class counts the bytes each of its transfers has received since the start
    (``served``), and a transfer is done when that count reaches its bytes plus the count at
    its start. The events then cost the number of paths, not of transfers (inception3's
    190 variables: 0.26 s of the decision before)."""
    pending = sorted(transfers, key=lambda tr: tr.start_s)
    waiting: dict[tuple, list] = {}  # path -> heap of (served count when done, order, key)
    served: dict[tuple, float] = {}
    done: dict[Hashable, float] = {}
    now, order, k = 0.0, 0, 0
    while k < len(pending) or waiting:
        while k < len(pending) and pending[k].start_s <= now:
            tr, k = pending[k], k + 1
            if tr.nbytes <= 0:
                done[tr.key] = now
                continue
            served.setdefault(tr.links, 0.0)
            heapq.heappush(waiting.setdefault(tr.links, []),
                           (served[tr.links] + float(tr.nbytes), order, tr.key))
            order += 1
        if not waiting:
            now = pending[k].start_s
            continue
        rates = max_min_rates({path: path for path in waiting}, capacity,
                              {path: len(heap) for path, heap in waiting.items()})
        step = min((heap[0][0] - served[path]) / rates[path] if rates[path] > 0
                   else float("inf") for path, heap in waiting.items())
        if k < len(pending):
            step = min(step, pending[k].start_s - now)
        now += step
        for path in list(waiting):
            served[path] += rates[path] * step
            heap = waiting[path]
            while heap and heap[0][0] - served[path] <= 1e-9 * max(1.0, rates[path]):
                done[heapq.heappop(heap)[2]] = now
            if not heap:
                del waiting[path]
    return done


def lockstep_step_s(layers: Sequence[Layer], compute_s: float, workers: int,
                  bandwidth: float, between_s: float = 0.0,
                  backward_ratio: float = BACKWARD_RATIO,
                  cpu_rates: tuple[float, float] = (float("inf"), float("inf"))) -> float:
    """Seconds of one step of ``workers`` plain PS workers in step: the last of a worker's
    pushes done, or its backward, whichever is later (module docstring). ``compute_s``: a
    worker batch's forward, backward and update of ``layers``; ``bandwidth``: every link's
    rate, bytes/s; ``between_s``: time between the forward and the backward (RALP's
    exchange with its tail on the PS); ``cpu_rates``: the bytes/s gRPC moves with all of a
    worker's device and of a PS task's (a link carries no faster than its end's CPU serves
    it: at 10 Gbit/s on a fifth of a core, about a quarter of the wire's rate)."""
    own = min(bandwidth, cpu_rates[0])
    capacity: dict[Hashable, float] = {("own", "in"): own, ("own", "out"): own}
    for layer in layers:
        for ps, _ in layer.variables:
            capacity[("ps", ps, "out")] = capacity[("ps", ps, "in")] = \
                min(bandwidth, cpu_rates[1]) / workers
    pulls = [Transfer((i, j), (("ps", ps, "out"), ("own", "in")), nbytes)
             for i, layer in enumerate(layers) for j, (ps, nbytes) in enumerate(layer.variables)]
    arrived = finish_times(pulls, capacity)
    forward = [compute_s * layer.flops_share / (1 + backward_ratio) for layer in layers]
    now = max(arrived.values(), default=0.0) + sum(forward) + between_s
    pushes = []
    for i in reversed(range(len(layers))):
        now += backward_ratio * forward[i]
        pushes += [Transfer((i, j), (("ps", ps, "in"), ("own", "out")), nbytes, now)
                   for j, (ps, nbytes) in enumerate(layers[i].variables)]
    return max(now, *finish_times(pushes, capacity).values()) if pushes else now
