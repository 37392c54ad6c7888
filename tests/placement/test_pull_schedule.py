"""iBatch's cost model and greedy batching (Wang et al. 2019) against a brute-force search."""

import itertools
import random

import pytest

from ralp.placement.pull_schedule import (
    PullProfile,
    check_batches,
    ibatch_batches,
    layer_batches,
    meets_constraint,
    pull_and_forward_time,
)


def _profile(forward, transfer, startup):
    return PullProfile(tuple(f"l{i}" for i in range(len(forward))), tuple(forward),
                       tuple(transfer), startup)


def _all_batchings(n):
    for cuts in itertools.product((False, True), repeat=n - 1):
        batches, start = [], 0
        for i, cut in enumerate(cuts):
            if cut:
                batches.append((start, i))
                start = i + 1
        batches.append((start, n - 1))
        yield tuple(batches)


def _random_profile(rng, n):
    return _profile([rng.uniform(0.0, 1.0) for _ in range(n)],
                    [rng.choice([0.0, rng.uniform(0.0, 1.0)]) for _ in range(n)],
                    rng.uniform(0.01, 0.3))


def test_the_cost_model_is_the_papers_formula_where_the_constraint_holds():
    p = _profile([0.2, 0.3, 0.1, 0.4], [0.5, 0.4, 0.6, 0.5], 0.1)
    batches = ((0, 0), (1, 2), (3, 3))
    assert meets_constraint(p, batches)
    exe = 3 * 0.1 + (0.5 + 0.4 + 0.6 + 0.5) + 0.4  # N Ts + sum Tt + last batch's forward
    assert pull_and_forward_time(p, batches) == pytest.approx(exe)
    # where it does not hold, compute waits for nothing: the timeline, not the formula
    slow = _profile([2.0, 0.1], [0.1, 0.1], 0.1)
    assert not meets_constraint(slow, ((0, 0), (1, 1)))
    assert pull_and_forward_time(slow, ((0, 0), (1, 1))) == pytest.approx(0.2 + 2.0 + 0.1)


@pytest.mark.parametrize("seed", range(200))
def test_the_greedy_never_beats_the_optimum_and_meets_the_constraint(seed):
    rng = random.Random(seed)
    p = _random_profile(rng, rng.randint(1, 9))
    chosen = ibatch_batches(p)
    check_batches(chosen, len(p.layers))
    assert meets_constraint(p, chosen)
    optimum = min(pull_and_forward_time(p, b) for b in _all_batchings(len(p.layers))
                  if meets_constraint(p, b))
    assert pull_and_forward_time(p, chosen) >= optimum - 1e-12


def test_the_greedy_is_mostly_optimal_on_random_profiles():
    rng, optimal = random.Random(1), 0
    for _ in range(200):
        p = _random_profile(rng, rng.randint(2, 8))
        best = min(pull_and_forward_time(p, b) for b in _all_batchings(len(p.layers))
                   if meets_constraint(p, b))
        optimal += abs(pull_and_forward_time(p, ibatch_batches(p)) - best) < 1e-9
    assert optimal >= 160  # 271 of 300 in the design run: a greedy, not a search


def test_more_batches_when_pulls_outweigh_compute():
    # big pulls, small compute: splitting hides each batch's forward under the next pull
    p = _profile([0.1] * 6, [1.0] * 6, 0.01)
    assert len(ibatch_batches(p)) > 1
    # a pull costs more to start than any transfer or compute: one batch
    assert ibatch_batches(_profile([0.1] * 4, [0.01] * 4, 10.0)) == ((0, 3),)


def test_layer_batches_follow_the_layers_that_own_variables():
    assert layer_batches([0, 5, 0, 0, 3, 0]) == ((0, 1), (2, 5))
    assert layer_batches([4, 4]) == ((0, 0), (1, 1))
    assert layer_batches([0, 0]) == ((0, 1),)


def test_bad_batchings_and_profiles_are_refused():
    with pytest.raises(ValueError, match="without gaps"):
        check_batches(((0, 1), (3, 4)), 5)
    with pytest.raises(ValueError, match="cover 2 of 5"):
        check_batches(((0, 1),), 5)
    with pytest.raises(ValueError, match="same length"):
        PullProfile(("a",), (0.1, 0.2), (0.1,), 0.1)
