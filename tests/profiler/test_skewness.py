"""Skewness of the parameter mass, against an independent computation."""

import numpy as np
import pytest
from scipy import stats

from ralp.profiler.skewness import is_eligible, parameter_skewness


def reference_skewness(params):
    """Population skewness of the positions, each repeated once per parameter (scipy)."""
    owning = [p for p in params if p > 0]
    sample = np.repeat(np.arange(1, len(owning) + 1), owning)
    return float(stats.skew(sample, bias=True))


@pytest.mark.parametrize(
    "params",
    [
        [100, 50, 20, 10, 5],  # early-heavy
        [5, 10, 20, 50, 100],  # late-heavy
        [10, 40, 10],  # symmetric
        [1, 0, 3, 0, 0, 7, 2],  # zeros are not positions
        [3, 1, 4, 1, 5, 9, 2, 6],
    ],
)
def test_matches_scipy_on_the_expanded_sample(params):
    assert parameter_skewness(params) == pytest.approx(reference_skewness(params), rel=1e-9)


def test_sign_follows_where_the_mass_sits():
    assert parameter_skewness([100, 50, 20, 10, 5]) > 0  # early-heavy: right-skewed
    assert parameter_skewness([5, 10, 20, 50, 100]) < 0  # late-heavy: left-skewed
    assert parameter_skewness([10, 40, 10]) == pytest.approx(0.0, abs=1e-12)
    assert parameter_skewness([7, 1, 1, 7]) == pytest.approx(0.0, abs=1e-12)


def test_is_not_the_sample_skewness_of_the_counts():
    # A VGG-16-like profile: 13 convolutions, then three FC layers holding most parameters.
    # The sample skewness of the counts is positive; the positional skewness is negative.
    convs = [1_792, 36_928, 73_856, 147_584, 295_168, 590_080, 590_080]
    convs += [1_180_160] + [2_359_808] * 5
    params = convs + [102_764_544, 16_781_312, 4_097_000]
    assert stats.skew(params) > 0
    assert parameter_skewness(params) < 0


def test_random_profiles_match_reference():
    rng = np.random.default_rng(0)
    for _ in range(50):
        params = rng.integers(0, 200, size=rng.integers(2, 12)).tolist()
        if sum(p > 0 for p in params) < 2 or len(set(p for p in params if p > 0)) < 1:
            continue
        if (
            np.var(
                np.repeat(
                    np.arange(1, sum(p > 0 for p in params) + 1), [p for p in params if p > 0]
                )
            )
            == 0
        ):
            continue
        assert parameter_skewness(params) == pytest.approx(
            reference_skewness(params), rel=1e-9, abs=1e-12
        )


def test_degenerate_inputs():
    assert parameter_skewness([]) == 0.0
    assert parameter_skewness([0, 42, 0]) == 0.0  # one owner: undefined, reported as 0
    with pytest.raises(ValueError):
        parameter_skewness([1, -2, 3])


def test_eligibility_threshold():
    assert is_eligible(-2.0)  # default K = -0.5
    assert is_eligible(-0.5)  # S <= K is inclusive
    assert not is_eligible(-0.49)
    assert not is_eligible(-1.0, threshold=-1.5)  # a stricter K keeps only strong skew
    assert is_eligible(-1.6, threshold=-1.5)
