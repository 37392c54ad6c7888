"""Pull schedules (iBatch, Wang et al. 2019): in which batches of consecutive layers a worker pulls
its
variables from the parameter servers at the start of a step.

- ``default``: what ParameterServerStrategy does: every variable read is its own receive, all
  issued at once when the step starts (they share the link).
- ``layer``: one pull per layer that owns variables, one after the other.
- ``ibatch``: a few batches of consecutive layers chosen by iBatch's greedy algorithm.

iBatch's cost model (its inputs are profiled, :class:`PullProfile`): a pull costs a fixed
start-up ``Ts`` plus its transfer time; pulls run one after the other; the forward pass of a
batch starts when its pull has arrived and the previous batch's forward is done. With batches
[1, l_1], ..., [l_{N-1}+1, L] and every pull after the first outlasting the previous batch's
forward (constraint (5): Ts + sum_{batch k+1} Tt_i > sum_{batch k} C_i), the step's pull and
forward time is EXE = N Ts + sum_i Tt_i + (forward time of the last batch).
:func:`pull_and_forward_time` computes the timeline for any batching (the formula where the
constraint holds), so schedules can be compared by the same model.

:func:`ibatch_batches` is the paper's greedy: enumerate the first two boundaries that meet the
constraint and keep the largest first-batch forward time (tie: the cheapest first pull); then
extend batch by batch, choosing the boundary that minimises (pull - compute) while meeting the
constraint; run the same greedy from the back; keep the better of the two by EXE. It is checked
against a brute-force search in the tests (never better than the optimum, always meets (5)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from ralp.errors import InvalidArgumentError

SCHEDULES = ("default", "layer", "ibatch")
Batches = tuple[tuple[int, int], ...]  # (first, last) layer index of each batch, inclusive


@dataclass(frozen=True)
class PullProfile:
    """Profiled inputs, per layer in forward order (layers without variables included)."""

    layers: tuple[str, ...]
    forward_s: tuple[float, ...]  # C_i: forward time of the layer for one worker's batch
    transfer_s: tuple[float, ...]  # Tt_i: time to transfer the layer's variables
    startup_s: float  # Ts: the fixed cost of one pull (a message)

    def __post_init__(self) -> None:
        if not len(self.layers) == len(self.forward_s) == len(self.transfer_s):
            raise InvalidArgumentError("layers, forward_s and transfer_s must have the same length")
        if not self.layers:
            raise InvalidArgumentError("a pull profile needs at least one layer")

    def forward(self, batch: tuple[int, int]) -> float:
        return sum(self.forward_s[batch[0] : batch[1] + 1])

    def pull(self, batch: tuple[int, int]) -> float:
        return self.startup_s + sum(self.transfer_s[batch[0] : batch[1] + 1])


def check_batches(batches: Batches, layers: int) -> None:
    """Raise ValueError unless ``batches`` cover layers 0..layers-1 in order, without gaps."""
    expected = 0
    for first, last in batches:
        if first != expected or last < first:
            raise InvalidArgumentError(f"batches must cover the layers in order without gaps: {batches}")
        expected = last + 1
    if expected != layers:
        raise InvalidArgumentError(f"batches cover {expected} of {layers} layers: {batches}")


def pull_and_forward_time(profile: PullProfile, batches: Batches) -> float:
    """When the last batch's forward ends, pulls one after the other (the cost model)."""
    check_batches(batches, len(profile.layers))
    pulled = forward_end = 0.0
    for batch in batches:
        pulled += profile.pull(batch)
        forward_end = max(pulled, forward_end) + profile.forward(batch)
    return forward_end


def meets_constraint(profile: PullProfile, batches: Batches) -> bool:
    """Constraint (5): every pull after the first outlasts the previous batch's forward."""
    return all(profile.pull(nxt) > profile.forward(cur) for cur, nxt in pairwise(batches))


def _extend(profile: PullProfile, batches: list[tuple[int, int]], end: int) -> list:
    """Forward greedy: append batches up to layer ``end`` - 1, each boundary minimising
    (pull - compute of the previous batch) among those meeting the constraint; the rest
    joins the last batch when no boundary meets it."""
    while batches[-1][1] < end - 1:
        start = batches[-1][1] + 1
        compute = profile.forward(batches[-1])
        options = [(profile.pull((start, last)) - compute, last)
                   for last in range(start, end)
                   if profile.pull((start, last)) > compute]
        if not options:
            first, _ = batches[-1]
            batches[-1] = (first, end - 1)
            break
        batches.append((start, min(options)[1]))
    return batches


def _forward_greedy(profile: PullProfile) -> Batches:
    """Of the first two boundaries that meet the constraint, the largest first-batch forward
    time (tie: the cheapest first pull), the second batch the shortest that meets it; then
    :func:`_extend`."""
    n = len(profile.layers)
    best: tuple | None = None  # (first batch forward, -its pull, b1, b2)
    for b1 in range(n - 1):
        first = (0, b1)
        b2 = next((b for b in range(b1 + 1, n)
                   if profile.pull((b1 + 1, b)) > profile.forward(first)), None)
        if b2 is not None:
            key = (profile.forward(first), -profile.pull(first))
            if best is None or key > best[:2]:
                best = (*key, b1, b2)
    if best is None:
        return ((0, n - 1),)
    return tuple(_extend(profile, [(0, best[2]), (best[2] + 1, best[3])], n))


def _backward_greedy(profile: PullProfile) -> Batches:
    """The same greedy from the back. The last batch first: of the last two boundaries that
    meet the constraint, the smallest last-batch forward time (it is the one forward pass no
    pull hides; tie: the cheapest last pull). Then batch by batch towards the first layer,
    each boundary minimising (pull of the batch after - compute) while meeting the
    constraint; what is left when none does joins the first batch."""
    n = len(profile.layers)
    best: tuple | None = None  # (last batch forward, its pull, -start of the last batch, b)
    for start in range(n - 1, 0, -1):  # the last batch is [start, n - 1]
        last = (start, n - 1)
        for first in range(start - 1, -1, -1):  # the batch before it: [first, start - 1]
            if profile.pull(last) > profile.forward((first, start - 1)):
                continue  # still meets it: try a longer one
            first += 1
            break
        else:
            first = 0
        if first <= start - 1 and profile.pull(last) > profile.forward((first, start - 1)):
            key = (profile.forward(last), profile.pull(last), -start)
            if best is None or key < best[:3]:
                best = (*key, first, start)
    if best is None:
        return ((0, n - 1),)
    first, start = best[3], best[4]
    batches = [(first, start - 1), (start, n - 1)]
    while batches[0][0] > 0:
        end = batches[0][0] - 1
        pull_after = profile.pull(batches[0])
        options = [(pull_after - profile.forward((f, end)), f) for f in range(end, -1, -1)
                   if pull_after > profile.forward((f, end))]
        if not options:
            batches[0] = (0, batches[0][1])
            break
        batches.insert(0, (min(options)[1], end))
    return tuple(batches)


def ibatch_batches(profile: PullProfile) -> Batches:
    """iBatch's greedy batching: both passes, the better by :func:`pull_and_forward_time`
    among those meeting constraint (5) (a single batch always does)."""
    candidates = [b for b in (_forward_greedy(profile), _backward_greedy(profile))
                  if meets_constraint(profile, b)]
    candidates.append(((0, len(profile.layers) - 1),))
    return min(candidates, key=lambda b: (pull_and_forward_time(profile, b), len(b)))


def layer_batches(transfer_s: Sequence[float]) -> Batches:
    """One batch per layer with variables; layers without them join the next such layer (the
    last ones join the last batch)."""
    batches: list[tuple[int, int]] = []
    start = 0
    for k, t in enumerate(transfer_s):
        if t > 0:
            batches.append((start, k))
            start = k + 1
    if not batches:
        return ((0, len(transfer_s) - 1),)
    if start < len(transfer_s):
        batches[-1] = (batches[-1][0], len(transfer_s) - 1)
    return tuple(batches)
