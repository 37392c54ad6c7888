"""Where a Stanza step's time goes, from Horovod's own timeline (``HOROVOD_TIMELINE=FILE``).

Horovod's timeline (written by rank 0, Chrome trace format) has, per named collective and per
step, a NEGOTIATE span (from the first rank asking for the collective to the last) and the
operation's span. A Stanza step (:mod:`ralp.horovod.stanza`) runs its phases one after the
other, and each phase ends where a collective's negotiation or operation ends:

- ``heads_forward``: the CONV ranks' update and the head's forward pass, from the end of the
  previous step's head allreduce (or gradient exchange, with one CONV rank) to the end of the
  activations' negotiation (the last CONV rank ready to send);
- ``exchange_in``: the activations' and labels' alltoall;
- ``tail``: the FC rank's tail, forward and backward, on the stacked batches: from the end of
  the exchange in to the end of the gradients' negotiation (the FC rank ready to send back);
- ``exchange_out``: the gradients' alltoall;
- ``heads_backward``: the head's backward pass, to the last CONV rank ready to allreduce its
  last gradient (the end of the negotiation that ends last);
- ``ring``: what is left of the CONV ranks' allreduces after that (to the end of the one that
  ends last). Each head gradient has an allreduce of its own, which starts as soon as every
  CONV rank has produced it: the part of the ring that runs during the backward pass is in
  ``heads_backward``.

Their sum is the step, from one exchange in to the next. The FC ranks' own allreduce (n_f > 1)
and update overlap the CONV ranks' backward pass and are not phases of their own.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from ralp.errors import RalpError
from ralp.horovod.stanza import ACTIVATIONS, GRADIENTS, HEAD_GRADS, LABELS

PHASES = ("heads_forward", "exchange_in", "tail", "exchange_out", "heads_backward", "ring")

Span = tuple[float, float]  # seconds since the timeline's start


class TimelineError(RalpError, ValueError):
    """A timeline that holds no Stanza step; the message says what it holds."""


@dataclass(frozen=True)
class StepPhases:
    heads_forward: float
    exchange_in: float
    tail: float
    exchange_out: float
    heads_backward: float
    ring: float
    step: float  # from this step's exchange in to the next one's


def read_events(path: str | Path) -> list[dict]:
    """The timeline's events. Horovod appends to the file as it goes and leaves the JSON array
    open when a job ends early: a missing ``]`` (and a trailing comma) is tolerated."""
    text = Path(path).read_text().rstrip().rstrip(",")
    if not text.endswith("]"):
        text += "]"
    return json.loads(text)


def _spans(events: list[dict]) -> dict[str, tuple[list[Span], list[Span]]]:
    """Per collective name: (negotiation spans, operation spans), top-level B/E pairs only."""
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name" and "name" in e.get("args", {})}
    open_spans: dict[int, list[tuple[str, float]]] = {}
    out: dict[str, tuple[list[Span], list[Span]]] = {}
    for e in events:
        if e.get("ph") not in ("B", "E") or e.get("pid") not in names:
            continue
        stack = open_spans.setdefault(e["pid"], [])
        if e["ph"] == "B":
            stack.append((e["name"], e["ts"] / 1e6))
            continue
        if not stack:
            continue
        kind, begin = stack.pop()
        if stack:  # a sub-activity (MEMCPY, GLOO_ALLREDUCE...) of the operation
            continue
        negotiations, operations = out.setdefault(names[e["pid"]], ([], []))
        (negotiations if kind.startswith("NEGOTIATE") else operations).append(
            (begin, e["ts"] / 1e6)
        )
    return out


def stanza_phases(events: list[dict]) -> list[StepPhases]:
    """Every complete step's phases (the first and last steps, cut by the timeline's ends or by
    set-up, are left out)."""
    spans = _spans(events)
    missing = [n for n in (ACTIVATIONS, LABELS, GRADIENTS) if n not in spans]
    if missing:
        found = sorted(spans)[:8]
        raise TimelineError(f"no Stanza collectives {missing} in this timeline (it names "
                            f"{found}); record one with HOROVOD_TIMELINE=FILE on a stanza run")
    act_neg, act_op = spans[ACTIVATIONS]
    _, lab_op = spans[LABELS]
    grad_neg, grad_op = spans[GRADIENTS]
    head = [spans[n] for n in sorted(spans) if n.startswith(HEAD_GRADS)]
    steps = min(len(act_neg), len(act_op), len(lab_op), len(grad_neg), len(grad_op),
                *(len(part) for spans_of in head for part in spans_of))

    def last_end(i: int, which: int) -> float:  # over the head's allreduces of step i
        return max(spans_of[which][i][1] for spans_of in head)

    rows = []
    for i in range(1, steps - 1):
        # the previous step's end on the CONV ranks: its ring, or its gradients' arrival
        previous_end = last_end(i - 1, 1) if head else grad_op[i - 1][1]
        received = max(act_op[i][1], lab_op[i][1])
        backward_end = last_end(i, 0) if head else grad_op[i][1]
        rows.append(StepPhases(
            heads_forward=act_neg[i][1] - previous_end,
            exchange_in=received - act_neg[i][1],
            tail=grad_neg[i][1] - received,
            exchange_out=grad_op[i][1] - grad_neg[i][1],
            heads_backward=backward_end - grad_op[i][1],
            ring=(last_end(i, 1) - backward_end) if head else 0.0,
            step=max(act_op[i + 1][1], lab_op[i + 1][1]) - received,
        ))
    if not rows:
        raise TimelineError(f"the timeline holds {steps} Stanza steps; at least 3 are needed "
                            "(the first and the last are cut)")
    return rows


def median_phases(rows: list[StepPhases]) -> dict[str, float]:
    """Each phase's median over the steps, and the median step, in seconds."""
    return {k: statistics.median(asdict(r)[k] for r in rows) for k in (*PHASES, "step")}
