"""The step timeline's interval arithmetic against numpy masks on a fine grid."""

import random

import numpy as np
import pytest

from ralp.audit.timeline import Pull, StepTimeline, intersect, length, union

GRID = np.linspace(0.0, 10.0, 100_001)


def _mask(intervals):
    m = np.zeros_like(GRID, dtype=bool)
    for a, b in intervals:
        m |= (a <= GRID) & (b > GRID)
    return m


def _random_intervals(rng, n):
    out = []
    for _ in range(n):
        a = rng.uniform(0, 9)
        out.append((a, a + rng.uniform(0, 1.5)))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_union_and_intersection_match_numpy(seed):
    rng = random.Random(seed)
    xs, ys = _random_intervals(rng, rng.randint(0, 6)), _random_intervals(rng, rng.randint(0, 6))
    step = GRID[1] - GRID[0]
    assert length(union(xs)) == pytest.approx(_mask(xs).sum() * step, abs=20 * step)
    both = intersect(union(xs), union(ys))
    assert length(both) == pytest.approx((_mask(xs) & _mask(ys)).sum() * step, abs=20 * step)
    merged = union(xs)
    assert all(a < b for (_, a), (b, _) in zip(merged, merged[1:], strict=False))  # disjoint


def test_the_hidden_share_of_a_step():
    pulls = [Pull("conv/ReadVariableOp/_1", 0.0, 1.0, "conv"),
             Pull("fc/ReadVariableOp/_2", 0.0, 3.0, "fc")]
    ops = [("model/conv/Conv2D:Conv2D", "Conv2D", 1.0, 2.5),
           ("gradient_tape/model/conv/Conv2DBackpropFilter:Conv2DBackpropFilter",
            "Conv2DBackpropFilter", 3.5, 4.0)]
    step = StepTimeline("s", 0.0, 4.0, pulls, ops)
    assert step.pull_active() == [(0.0, 3.0)]
    assert step.hidden_share() == pytest.approx(1.5 / 3.0)  # the conv ran 1.0-2.5 of 0-3
    assert step.first_op_of(["conv", "fc"]) == {"conv": 1.0}  # gradient ops do not count
    assert StepTimeline("t", 0.0, 1.0).hidden_share() is None
