"""Skewness of where a model's parameter mass sits (BRIEF §2, step 1).

The variable is the position i = 1..n of each layer that owns parameters, in forward order;
its weight is that layer's share of the parameters. S < 0 means the mass sits in the late
layers (left-skewed), as in every classic CNN, where the FC layers hold most parameters.
This is *not* the sample skewness of the parameter counts themselves.
"""

from __future__ import annotations

from collections.abc import Sequence

from ralp.defaults import DEFAULT_THRESHOLD


def parameter_skewness(params: Sequence[int]) -> float:
    """Third standardized moment of position, weighted by parameter count.

    ``params`` are the parameter counts of the layers in forward order; layers without
    parameters are ignored (positions count parameter-owning layers only). Returns 0.0 when
    the moment is undefined: fewer than two parameter-owning layers.
    """
    owning = [p for p in params if p > 0]
    if any(p < 0 for p in params):
        raise ValueError("parameter counts must be non-negative")
    if len(owning) < 2:
        return 0.0
    total = float(sum(owning))
    weights = [p / total for p in owning]
    positions = range(1, len(owning) + 1)
    mu = sum(w * i for w, i in zip(weights, positions, strict=True))
    m2 = sum(w * (i - mu) ** 2 for w, i in zip(weights, positions, strict=True))
    m3 = sum(w * (i - mu) ** 3 for w, i in zip(weights, positions, strict=True))
    return m3 / m2**1.5


def is_eligible(skewness: float, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """Step 2: layer placement is worth trying iff S <= K."""
    return skewness <= threshold
