"""When a worker's pulls arrive and when its ops run: a worker's step timeline, from a trace.

A worker task serves ``tf.profiler`` (``RALP_PROFILER_PORT``, :mod:`ralp.cluster.task_server`);
:func:`capture` asks it for a trace of the steps it runs meanwhile. In the trace (an XSpace),
every receive is an asynchronous kernel with a start and a done event, and every other kernel
an event with its op type. A *pull* is a receive of a variable's value (a ``ReadVariableOp``
on a PS) or of a packed batch of them (``ralp_pull_<k>``). Per step:

- the step window: from its first pull's start to the next step's;
- pull-active time: the union of the pulls' [start, done] intervals;
- compute-busy time: the union of the compute kernels' intervals;
- the share of pull time hidden behind compute: |pull-active ∩ compute-busy| / |pull-active|.
"""

from __future__ import annotations

import glob
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ralp.placement.rewriter import layer_of_op

PULL_MARKERS = ("ReadVariableOp", "ralp_pull_")
_NOT_COMPUTE = {"", "_Send", "_Recv", "_HostSend", "_HostRecv", "NoOp", "Identity"}

Interval = tuple[float, float]  # seconds, on the worker's clock


@dataclass(frozen=True)
class Pull:
    name: str  # the receive's node name
    start: float
    done: float
    layer: str | None  # the layer it feeds, when known


@dataclass
class StepTimeline:
    step_id: str
    start: float
    end: float
    pulls: list[Pull] = field(default_factory=list)
    ops: list[tuple[str, str, float, float]] = field(default_factory=list)  # name, type, from, to

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def pull_active(self) -> list[Interval]:
        return union((p.start, p.done) for p in self.pulls)

    def compute_busy(self) -> list[Interval]:
        return union((a, b) for _, _, a, b in self.ops)

    def hidden_share(self) -> float | None:
        """Share of the pull-active time during which the worker also computed."""
        active = length(self.pull_active())
        if active <= 0:
            return None
        return length(intersect(self.pull_active(), self.compute_busy())) / active

    def first_op_of(self, layer_names: Iterable[str]) -> dict[str, float]:
        """Each layer's first forward op (gradient ops excluded), seconds after the start."""
        names = set(layer_names)
        first: dict[str, float] = {}
        for name, _, a, _ in self.ops:
            if name.startswith("gradient_tape/"):
                continue
            layer = layer_of_op(name.split(":")[0], names)
            if layer is not None and layer not in first:
                first[layer] = a - self.start
        return first


def union(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[list[float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def intersect(xs: Sequence[Interval], ys: Sequence[Interval]) -> list[Interval]:
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if a < b:
            out.append((a, b))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def length(intervals: Iterable[Interval]) -> float:
    return sum(b - a for a, b in intervals)


def step_timelines(path: str, layer_names: Iterable[str] = ()) -> list[StepTimeline]:
    """The complete steps of one worker's trace (an ``.xplane.pb``), in time order."""
    from ralp._compat import read_xspace_events

    names = set(layer_names)
    starts: dict[tuple[str, str], float] = {}
    dones: dict[tuple[str, str], float] = {}
    ops: list[tuple[str, str, float, float]] = []
    for event in read_xspace_events(path):
        node = event.stats.get("name", "")
        if event.stats.get("kernel_type") == "_Recv" and any(m in node for m in PULL_MARKERS):
            key = (event.stats.get("step_id", ""), node)
            if event.name.endswith("::Start"):
                starts[key] = event.start
            elif event.name.endswith("::Done"):
                dones[key] = event.start
        elif event.op_type not in _NOT_COMPUTE:
            ops.append((event.name, event.op_type, event.start, event.start + event.seconds))
    pulls: dict[str, list[Pull]] = {}
    for key, start in starts.items():
        if key in dones:
            pulls.setdefault(key[0], []).append(
                Pull(key[1], start, dones[key], layer_of_op(key[1], names) if names else None))
    steps = sorted((min(p.start for p in ps), step_id, ps) for step_id, ps in pulls.items())
    most = max((len(ps) for *_, ps in steps), default=0)
    timelines = []
    for k, (start, step_id, ps) in enumerate(steps):
        if len(ps) < most:  # a step the trace cut short
            continue
        # a step ends where the next begins; the last one, with its last op
        end = (steps[k + 1][0] if k + 1 < len(steps)
               else max((o[3] for o in ops if o[2] >= start), default=start))
        inside = [o for o in ops if start <= o[2] < end]
        timelines.append(StepTimeline(step_id, start, end, sorted(ps, key=lambda p: p.start),
                                      sorted(inside, key=lambda o: o[2])))
    return timelines


def capture(worker_address: str, logdir: str, seconds: float) -> str:
    """Trace the worker serving tf.profiler at ``worker_address`` (host:port) for ``seconds``
    (run steps meanwhile); returns the trace file's path."""
    import tensorflow as tf

    tf.profiler.experimental.client.trace(f"grpc://{worker_address}", logdir,
                                          duration_ms=int(seconds * 1000))
    found = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True),
                   key=os.path.getmtime)
    if not found:
        raise RuntimeError(f"the profiler wrote no trace under {logdir}")
    return found[-1]


def trace_while_training(trainer, dataset_fn: Callable, batch_size: int, worker_address: str,
                         seconds: float, layer_names: Iterable[str] = ()) -> list[StepTimeline]:
    """The complete steps of a ``seconds`` trace of the worker serving tf.profiler at
    ``worker_address``, while ``trainer`` (a ``ralp.Trainer`` of a PS mode) keeps
    training on ``dataset_fn`` in a thread: a trace only sees the steps run while it lasts."""
    stop = threading.Event()
    workers = trainer.runtime.workers

    def keep_training() -> None:
        while not stop.is_set():
            trainer.fit(dataset_fn, steps_per_epoch=workers, batch_size=batch_size,
                        verbose=0)

    thread = threading.Thread(target=keep_training, daemon=True)
    thread.start()
    try:
        with tempfile.TemporaryDirectory(prefix="ralp-trace-") as logdir:
            return step_timelines(capture(worker_address, logdir, seconds), layer_names)
    finally:
        stop.set()
        thread.join()
