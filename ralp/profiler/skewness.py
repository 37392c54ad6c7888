"""Skewness of where a model's parameter mass sits (RALP's profiler, step 1, Park et al. 2019).

The variable is the *position* of a layer in forward order, weighted by its share of the
parameters. Which rows take a position is the paper's reading of the benchmark model code:
one position per convolution, pooling and fully connected layer
(:data:`ralp.profiler.kinds.POSITION_KINDS`), so

- a pooling layer holds a position with zero weight;
- a row of another kind holds no position (activations, dropout, flatten, concat/add,
  padding, inputs, keras.ops nodes); if it owns parameters -- a convolution's batch
  normalization, above all -- they count at the position of the positioned layer that feeds
  it: the latest one (in forward order) reached by going back through position-less rows. A
  norm fed by no positioned layer (say, one on the model input) counts at position 1.

Counting only parameter-owning layers, as ralp once did, gives visibly different values (lenet
+0.54 instead of -1.16); the sample skewness of the counts themselves is a third, different
number. S < 0: the mass sits in the late layers (left-skewed), as in every classic CNN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ralp.defaults import DEFAULT_THRESHOLD
from ralp.errors import InvalidArgumentError
from ralp.profiler.kinds import POSITION_KINDS


@dataclass(frozen=True)
class PositionedRow:
    """What the position rule needs to know about one row of the layer table."""

    name: str
    kind: str
    params: int
    inbound: tuple[str, ...] = ()  # producers


@dataclass(frozen=True)
class Positions:
    """Per row: its own position (or None) and the position its parameters count at."""

    position: tuple[int | None, ...]  # 1-based, rows of POSITION_KINDS only
    counted_at: tuple[int | None, ...]  # None: holds no position and counts nowhere


def assign_positions(rows: Sequence[PositionedRow]) -> Positions:
    """The position rule: which rows hold a position, and where every parameter counts."""
    own: dict[str, int] = {}
    for row in rows:
        if row.kind in POSITION_KINDS:
            own[row.name] = len(own) + 1
    by_name = {row.name: row for row in rows}
    counted: list[int | None] = []
    for row in rows:
        if row.name in own:
            counted.append(own[row.name])
        elif row.params > 0 or row.kind == "norm":
            counted.append(_feeding_position(row, by_name, own) if own else None)
        else:
            counted.append(None)
    return Positions(tuple(own.get(row.name) for row in rows), tuple(counted))


def _feeding_position(row: PositionedRow, by_name, own: dict[str, int]) -> int:
    """The latest position reached from ``row`` back through position-less rows (else 1)."""
    found: list[int] = []
    seen: set[str] = set()
    stack = list(row.inbound)
    while stack:
        name = stack.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        if name in own:
            found.append(own[name])
        else:
            stack.extend(by_name[name].inbound)
    return max(found, default=1)


def position_skewness(weights: Sequence[float]) -> float:
    """Third standardized moment of the positions 1..n, weighted by ``weights``.

    w_i = P_i / sum(P), mu = sum(w_i i), m_k = sum(w_i (i - mu)^k), S = m_3 / m_2^(3/2).
    Returns 0.0 where the moment is undefined: no weight, or all of it at one position.
    """
    if any(w < 0 for w in weights):
        raise InvalidArgumentError("parameter counts must be non-negative")
    total = float(sum(weights))
    if total <= 0:
        return 0.0
    shares = [w / total for w in weights]
    positions = range(1, len(weights) + 1)
    mu = sum(w * i for w, i in zip(shares, positions, strict=True))
    m2 = sum(w * (i - mu) ** 2 for w, i in zip(shares, positions, strict=True))
    m3 = sum(w * (i - mu) ** 3 for w, i in zip(shares, positions, strict=True))
    if m2 <= 0.0:
        return 0.0
    return m3 / m2**1.5


def is_eligible(skewness: float, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """Step 2: layer placement is worth trying iff S <= K."""
    return skewness <= threshold
