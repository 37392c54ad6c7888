"""``fit``'s validation, as Keras does it: ``validation_data`` (``(x, y)``, ``(x, y,
sample_weight)`` or a dataset; ``x`` in any structure ``fit`` takes), ``validation_split`` (the
last samples of ``x``, of every input's array, before shuffling), ``validation_freq``, ``validation_steps`` and ``validation_batch_size``; the
epoch's ``val_*`` logs are Keras' ``evaluate`` of the current weights."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from ralp.errors import InvalidArgumentError


@dataclass
class Validation:
    """What one ``fit`` validates on, and after which epochs."""

    x: object  # arrays, or a tf.data.Dataset of batches (then y and sample_weight are None)
    y: object = None
    sample_weight: object = None
    freq: int | Collection[int] = 1
    steps: int | None = None
    batch_size: int | None = None

    def due(self, epoch: int) -> bool:
        """After 0-based ``epoch``? ``freq`` an int: every ``freq`` epochs; a collection: the
        1-based epochs it lists (Keras' ``validation_freq``)."""
        if isinstance(self.freq, int):
            return (epoch + 1) % self.freq == 0
        return epoch + 1 in self.freq


def _rows(x, start: int, end: int | None):
    """Rows ``start:end`` of ``x``: an array, or a tuple or dict of arrays (several inputs)."""
    if isinstance(x, dict):
        return {k: np.asarray(v)[start:end] for k, v in x.items()}
    if isinstance(x, tuple | list):
        return type(x)(np.asarray(v)[start:end] for v in x)
    return np.asarray(x)[start:end]


def validation_for(x, y, sample_weight=None, *, validation_data=None,
                   validation_split: float = 0.0, validation_freq=1, validation_steps=None,
                   validation_batch_size=None):
    """(training x, y and sample_weight, the :class:`Validation` or None), checked as Keras
    checks them; ``validation_split`` takes the last share of the arrays before shuffling."""
    if not 0.0 <= validation_split < 1.0:
        raise InvalidArgumentError(f"validation_split must be in [0, 1), got {validation_split!r}")
    if isinstance(validation_freq, bool) or (
            isinstance(validation_freq, int) and validation_freq < 1):
        raise InvalidArgumentError("validation_freq must be a positive integer or a collection "
                                   f"of epoch numbers, got {validation_freq!r}")
    if validation_split and validation_data is not None:
        raise InvalidArgumentError("give validation_data or validation_split, not both")
    settings = dict(freq=validation_freq, steps=validation_steps, batch_size=validation_batch_size)
    if validation_split:
        if x is None or y is None or callable(x) or hasattr(x, "element_spec"):
            raise InvalidArgumentError("validation_split takes the last samples of x and y: give "
                                       "arrays (with a dataset, pass validation_data)")
        y = np.asarray(y)
        keep = len(y) - int(len(y) * validation_split)
        if keep < 1 or keep == len(y):
            raise InvalidArgumentError(f"validation_split={validation_split} of {len(y)} samples "
                                       "leaves no training or no validation samples")
        weights = None if sample_weight is None else np.asarray(sample_weight)
        held = Validation(_rows(x, keep, None), y[keep:],
                          None if weights is None else weights[keep:], **settings)
        return _rows(x, 0, keep), y[:keep], None if weights is None else weights[:keep], held
    if validation_data is None:
        return x, y, sample_weight, None
    if isinstance(validation_data, tuple | list):
        if len(validation_data) not in (2, 3):
            raise InvalidArgumentError("validation_data is (x_val, y_val), (x_val, y_val, "
                                       "sample_weight) or a tf.data.Dataset of batches")
        return x, y, sample_weight, Validation(*validation_data, **settings)
    return x, y, sample_weight, Validation(validation_data, **settings)
