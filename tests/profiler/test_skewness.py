"""Skewness of the parameter mass over the paper's layer positions, against numpy and scipy."""

import keras
import numpy as np
import pytest
from keras import layers
from scipy import stats

from ralp.profiler.layer_table import build_layer_table
from ralp.profiler.skewness import (
    PositionedRow,
    assign_positions,
    is_eligible,
    position_skewness,
)


def numpy_skewness(weights):
    """RALP's profiler (Park et al. 2019) written out in numpy: w_i = P_i / sum P, mu, m2, m3
    over positions 1..n."""
    p = np.asarray(weights, dtype=float)
    w = p / p.sum()
    i = np.arange(1, len(p) + 1)
    mu = np.sum(w * i)
    m2 = np.sum(w * (i - mu) ** 2)
    m3 = np.sum(w * (i - mu) ** 3)
    return m3 / m2**1.5


def scipy_skewness(weights):
    """Population skewness of the positions, each repeated once per parameter (scipy)."""
    sample = np.repeat(np.arange(1, len(weights) + 1), weights)
    return float(stats.skew(sample, bias=True))


@pytest.mark.parametrize(
    "weights",
    [
        [100, 50, 20, 10, 5],  # early-heavy
        [5, 10, 20, 50, 100],  # late-heavy
        [10, 40, 10],  # symmetric
        [1, 0, 3, 0, 0, 7, 2],  # zero-weight positions (pooling) still take a place
        [3, 1, 4, 1, 5, 9, 2, 6],
    ],
)
def test_matches_numpy_and_scipy(weights):
    assert position_skewness(weights) == pytest.approx(numpy_skewness(weights), rel=1e-9)
    assert position_skewness(weights) == pytest.approx(scipy_skewness(weights), rel=1e-9)


def test_pooling_positions_change_the_value():
    # conv, pool, conv, pool, fc, fc: the pools hold places with no weight.
    with_pools = [10, 0, 20, 0, 500, 50]
    without = [10, 20, 500, 50]
    assert position_skewness(with_pools) == pytest.approx(numpy_skewness(with_pools))
    assert position_skewness(with_pools) != pytest.approx(position_skewness(without))


def test_random_weights_match_reference():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(60):
        weights = rng.integers(0, 200, size=rng.integers(2, 12)).tolist()
        if sum(w > 0 for w in weights) < 2:
            continue
        assert position_skewness(weights) == pytest.approx(numpy_skewness(weights), rel=1e-9)
        checked += 1
    assert checked > 40


def test_sign_follows_where_the_mass_sits():
    assert position_skewness([100, 50, 20, 10, 5]) > 0  # early-heavy: right-skewed
    assert position_skewness([5, 10, 20, 50, 100]) < 0  # late-heavy: left-skewed
    assert position_skewness([10, 40, 10]) == pytest.approx(0.0, abs=1e-12)
    assert position_skewness([7, 0, 0, 7]) == pytest.approx(0.0, abs=1e-12)


def test_degenerate_inputs():
    assert position_skewness([]) == 0.0
    assert position_skewness([0, 42, 0]) == 0.0  # all the mass at one position: undefined
    with pytest.raises(ValueError):
        position_skewness([1, -2, 3])


# A hand-made layer list: (name, kind, params, producers). The positions are written out by
# hand from the rule: conv, pool and fc rows take one; a norm's parameters go to the conv
# feeding it (through an activation, too); activations, flatten, dropout, adds take none.
HAND_ROWS = [
    ("input", "other", 0, ()),
    ("conv1", "conv", 100, ("input",)),
    ("bn1", "norm", 10, ("conv1",)),
    ("relu1", "other", 0, ("bn1",)),
    ("pool1", "pool", 0, ("relu1",)),
    ("conv2", "conv", 200, ("pool1",)),
    ("relu2", "other", 0, ("conv2",)),
    ("bn2", "norm", 20, ("relu2",)),  # after the activation: still conv2's
    ("add", "other", 0, ("bn2", "pool1")),
    ("pool2", "pool", 0, ("add",)),
    ("flatten", "other", 0, ("pool2",)),
    ("fc1", "fc", 5000, ("flatten",)),
    ("drop", "other", 0, ("fc1",)),
    ("fc2", "fc", 300, ("drop",)),
]
HAND_POSITIONS = [None, 1, None, None, 2, 3, None, None, None, 4, None, 5, None, 6]
HAND_COUNTED_AT = [None, 1, 1, None, 2, 3, None, 3, None, 4, None, 5, None, 6]
HAND_WEIGHTS = [110, 0, 220, 0, 5000, 300]


def test_position_rule_on_a_hand_made_layer_list():
    rows = [PositionedRow(*row) for row in HAND_ROWS]
    positions = assign_positions(rows)
    assert list(positions.position) == HAND_POSITIONS
    assert list(positions.counted_at) == HAND_COUNTED_AT
    weights = [0] * 6
    for (_, _, params, _), at in zip(HAND_ROWS, positions.counted_at, strict=True):
        if at is not None:
            weights[at - 1] += params
    assert weights == HAND_WEIGHTS
    assert position_skewness(weights) == pytest.approx(numpy_skewness(HAND_WEIGHTS), rel=1e-12)
    # The old reading (parameter owners only, norms as layers of their own) differs.
    owners = [p for _, _, p, _ in HAND_ROWS if p > 0]
    assert numpy_skewness(owners) != pytest.approx(numpy_skewness(HAND_WEIGHTS), rel=1e-3)


def test_a_norm_fed_by_no_positioned_layer_counts_at_the_first_position():
    rows = [PositionedRow("in", "other", 0), PositionedRow("bn", "norm", 6, ("in",)),
            PositionedRow("conv", "conv", 10, ("bn",)), PositionedRow("fc", "fc", 4, ("conv",))]
    positions = assign_positions(rows)
    assert positions.counted_at == (None, 1, 1, 2)


def test_a_norm_after_a_merge_counts_at_the_latest_feeding_position():
    # bn follows an add of an early conv (position 1) and a late one (position 3).
    rows = [PositionedRow("c1", "conv", 5), PositionedRow("p", "pool", 0, ("c1",)),
            PositionedRow("c2", "conv", 5, ("p",)), PositionedRow("add", "other", 0, ("c1", "c2")),
            PositionedRow("bn", "norm", 2, ("add",))]
    assert assign_positions(rows).counted_at[-1] == 3


def hand_model():
    """The hand-made list as a Keras model (the add joins conv2's branch and pool1)."""
    x = inp = keras.Input((8, 8, 4), name="input")
    a = layers.Conv2D(4, 3, padding="same", name="conv1")(x)
    a = layers.BatchNormalization(name="bn1")(a)
    a = layers.Activation("relu", name="relu1")(a)
    p = layers.MaxPooling2D(2, name="pool1")(a)
    b = layers.Conv2D(4, 3, padding="same", name="conv2")(p)
    b = layers.Activation("relu", name="relu2")(b)
    b = layers.BatchNormalization(name="bn2")(b)
    x = layers.Add(name="add")([b, p])
    x = layers.MaxPooling2D(2, name="pool2")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(64, name="fc1")(x)
    x = layers.Dropout(0.5, name="drop")(x)
    x = layers.Dense(10, name="fc2")(x)
    return keras.Model(inp, x, name="hand")


def test_the_layer_table_applies_the_rule():
    table = build_layer_table(hand_model(), 1)
    assert [r.name for r in table.rows] == [name for name, *_ in HAND_ROWS]
    assert [r.position for r in table.rows] == HAND_POSITIONS
    assert [r.counted_at for r in table.rows] == HAND_COUNTED_AT
    rows = {r.name: r.params for r in table.rows}
    expected = [rows["conv1"] + rows["bn1"], 0, rows["conv2"] + rows["bn2"], 0, rows["fc1"],
                rows["fc2"]]
    assert table.position_weights == expected
    assert sum(expected) == table.params_total


def test_eligibility_threshold():
    assert is_eligible(-2.0)  # default K = -0.5
    assert is_eligible(-0.5)  # S <= K is inclusive
    assert not is_eligible(-0.49)
    assert not is_eligible(-1.0, threshold=-1.5)  # a stricter K keeps only strong skew
    assert is_eligible(-1.6, threshold=-1.5)
