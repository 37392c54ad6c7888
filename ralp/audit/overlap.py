"""When an allreduce mode's reductions run against its backward pass: a rank's step timeline,
from a ``tf.profiler`` trace of the rank.

In the trace (an XSpace, :func:`ralp._compat.read_xspace_events`) every asynchronous kernel
(Horovod's allreduce, TensorFlow's collective all-reduce) has a start event, when the
executor handed it its input (Horovod queues it for its background thread; a collective
starts its ring), and a done event, when its sum came back; both carry the kernel's node name
and the step's id. A step is one run of the step function (a ``FunctionRun`` event of that id
to its ``ExecutorDoneCallback``); its backward pass is the kernels named under the gradient
tape (``gradient_tape/``) that ran inside it. Per step:

- the backward pass's first start and last end;
- each gradient reduction's start and done (the loss's divisor, ``den``, apart);
- ``lead_s``: how long before the backward pass ended the first gradient's reduction started
  (negative: it started after), and ``done_lead_s`` the same for the first one done;
- ``exposed_s``: how long the reductions ran on after the backward pass (the last done less
  the backward pass's end): the communication that overlap has not hidden.

Times are seconds from the step's start, on the rank's clock.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

REDUCTION_KERNELS = ("HorovodAllreduce", "HorovodGroupedAllreduce", "CollectiveReduceV2")
# the loss divisor's sum: horovod's, stanza's FC ranks', collective's (its first, unscoped)
DEN = re.compile(r"^(ralp_den|ralp_stanza_den|CollectiveReduceV2)$")
BACKWARD = "gradient_tape/"
_START, _DONE = "ExecutorState::ProcessAsync::Start", "ExecutorState::ProcessAsync::Done"


@dataclass(frozen=True)
class Reduction:
    name: str
    start: float
    done: float


@dataclass
class StepOverlap:
    step_id: str
    start: float  # on the rank's clock; every other time is from here
    seconds: float
    backward: tuple[float, float]  # the backward pass's first start and last end
    reductions: list[Reduction] = field(default_factory=list)  # the gradients', by start
    den: Reduction | None = None

    @property
    def lead_s(self) -> float:
        return self.backward[1] - self.reductions[0].start

    @property
    def done_lead_s(self) -> float:
        return self.backward[1] - min(r.done for r in self.reductions)

    @property
    def exposed_s(self) -> float:
        return max(r.done for r in self.reductions) - self.backward[1]

    @property
    def done_in_backward(self) -> int:
        """The gradient reductions whose sum was back before the backward pass ended."""
        return sum(r.done <= self.backward[1] for r in self.reductions)

    def figures(self) -> dict:
        return {"step_s": self.seconds, "backward_s": list(self.backward),
                "reductions": len(self.reductions), "lead_s": self.lead_s,
                "done_lead_s": self.done_lead_s, "exposed_s": self.exposed_s,
                "done_in_backward": self.done_in_backward,
                "first": asdict(self.reductions[0]),
                "den": asdict(self.den) if self.den is not None else None}


def step_overlaps(events: Iterable, origin: float = 0.0) -> list[StepOverlap]:
    """Every step of a trace's events (``TraceEvent`` s) that ran gradient reductions and a
    backward pass, in time order; each step's ``start`` on the events' clock plus ``origin``
    (the trace's start on the epoch's clock, :func:`ralp._compat.xspace_start_time`, lays
    several traces on one clock)."""
    runs: dict[str, list[float]] = {}
    reductions: dict[str, dict[str, list[float]]] = {}
    ops: list[tuple[float, float]] = []
    for e in events:
        stats = e.stats
        if e.name == "FunctionRun" and "id" in stats:
            runs.setdefault(stats["id"], [e.start, e.start])[0] = e.start
        elif e.name == "ExecutorDoneCallback" and stats.get("id") in runs:
            runs[stats["id"]][1] = max(runs[stats["id"]][1], e.start)
        elif e.name in (_START, _DONE) and stats.get("kernel_type") in REDUCTION_KERNELS:
            times = reductions.setdefault(stats["step_id"], {}).setdefault(
                stats["name"], [float("nan"), float("nan")])
            times[0 if e.name == _START else 1] = e.start
        elif e.op_type and e.name.startswith(BACKWARD):
            ops.append((e.start, e.start + e.seconds))
    steps = []
    for step_id, named in reductions.items():
        if step_id not in runs:
            continue
        start, end = runs[step_id]
        backward = [o for o in ops if start <= o[0] <= end]
        done = {n: Reduction(n, t[0] - start, t[1] - start) for n, t in named.items()
                if t[0] == t[0] and t[1] == t[1]}  # both events inside the trace
        grads = sorted((r for n, r in done.items() if not DEN.match(n)), key=lambda r: r.start)
        if not backward or not grads or len(done) < len(named):
            continue
        den = next((r for n, r in done.items() if DEN.match(n)), None)
        steps.append(StepOverlap(step_id, origin + start, end - start,
                                 (min(a for a, _ in backward) - start,
                                  max(b for _, b in backward) - start), grads, den))
    return sorted(steps, key=lambda s: s.start)


def median_figures(steps: list[StepOverlap]) -> dict:
    """The median over ``steps`` of each step's figures (seconds), and how many steps."""
    if not steps:
        return {"steps": 0}
    keys = ("step_s", "lead_s", "done_lead_s", "exposed_s", "done_in_backward")
    rows = [s.figures() for s in steps]
    out = {k: statistics.median(r[k] for r in rows) for k in keys}
    out["backward_end_s"] = statistics.median(r["backward_s"][1] for r in rows)
    out["first_start_s"] = statistics.median(r["first"]["start"] for r in rows)
    out["reductions"] = rows[0]["reductions"]
    out["steps"] = len(rows)
    return out


# ------------------------------------------------------------------ Horovod's own timeline

GRADIENT_SUMS = re.compile(r"^(ralp_grad_\d+|ralp_stanza_head_\d+|ralp_stanza_tail_\d+)$")


def ring_spans(events: list[dict], names: re.Pattern = GRADIENT_SUMS) -> list[tuple]:
    """When each gradient allreduce of a Horovod timeline (``HOROVOD_TIMELINE``, written by
    rank 0: the collectives of rank 0's process sets) ran on the wire, as (begin, end, tensor)
    with times in seconds on the epoch's clock (the timeline's
    ``start_time_since_epoch_in_micros`` plus each event's time), by begin. Tensors fused into
    one operation share its times. A negotiation's end is
    no sign of a rank's backward pass: while Horovod's thread runs an operation, the tensors
    handed over meanwhile are negotiated after it."""
    origin = next((e["args"]["start_time_since_epoch_in_micros"] / 1e6 for e in events
                   if e.get("ph") == "M" and "start_time_since_epoch_in_micros"
                   in e.get("args", {})), 0.0)
    pids = {e["pid"]: e["args"]["name"] for e in events
            if e.get("ph") == "M" and e.get("name") == "process_name"
            and names.match(e.get("args", {}).get("name", ""))}
    spans, stacks = [], {}
    for e in events:
        pid = e.get("pid")
        if pid not in pids or e.get("ph") not in ("B", "E"):
            continue
        stack = stacks.setdefault(pid, [])
        if e["ph"] == "B":
            stack.append((e["name"], e["ts"] / 1e6))
        elif stack:
            kind, begin = stack.pop()
            if not stack and not kind.startswith("NEGOTIATE"):  # the operation itself
                spans.append((origin + begin, origin + e["ts"] / 1e6, pids[pid]))
    return sorted(spans)


def wire_lead(step: StepOverlap, spans: list[tuple]) -> float | None:
    """How long before ``step``'s backward pass ended (both on the epoch's clock) the first of
    its gradient allreduces went on the wire; None if the timeline has none of them (another
    process set's) inside the step."""
    mine = {r.name for r in step.reductions}
    inside = [b for b, _, name in spans
              if name in mine and step.start <= b <= step.start + step.seconds]
    return step.start + step.backward[1] - min(inside) if inside else None
