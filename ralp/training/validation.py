"""``fit``'s validation, as Keras does it: ``validation_data`` (arrays or a dataset),
``validation_split`` (the last samples of ``x``, before shuffling) and ``validation_freq``;
the epoch's ``val_*`` logs computed on the coordinator with the current weights."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from ralp.errors import InvalidArgumentError


@dataclass
class Validation:
    """What one ``fit`` validates on, and after which epochs."""

    x: np.ndarray | None = None
    y: np.ndarray | None = None
    dataset: object | None = None  # a finite tf.data.Dataset of (images, labels) batches
    freq: int | Collection[int] = 1

    def due(self, epoch: int) -> bool:
        """After 0-based ``epoch``? ``freq`` an int: every ``freq`` epochs; a collection: the
        1-based epochs it lists (Keras' ``validation_freq``)."""
        if isinstance(self.freq, int):
            return (epoch + 1) % self.freq == 0
        return epoch + 1 in self.freq

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self.dataset is None:
            return self.x, self.y
        xs, ys = [], []
        for images, labels in self.dataset:
            xs.append(np.asarray(images))
            ys.append(np.asarray(labels))
        if not xs:
            raise InvalidArgumentError("validation_data is an empty dataset")
        return np.concatenate(xs), np.concatenate(ys)

    def logs(self, trainer) -> dict[str, float]:
        """``val_loss``, ``val_accuracy`` and ``val_<metric>`` of the current weights."""
        x, y = self.arrays()
        return {f"val_{k}": v for k, v in trainer.evaluate(x, y).items()}


def validation_for(x, y, *, validation_data=None, validation_split: float = 0.0,
                   validation_freq: int | Collection[int] = 1):
    """(training x, training y, the :class:`Validation` or None), checked as Keras checks
    them; ``validation_split`` takes the last share of ``x`` and ``y`` before shuffling."""
    if not 0.0 <= validation_split < 1.0:
        raise InvalidArgumentError(f"validation_split must be in [0, 1), got {validation_split!r}")
    if isinstance(validation_freq, bool) or (
            isinstance(validation_freq, int) and validation_freq < 1):
        raise InvalidArgumentError(f"validation_freq must be a positive integer or a collection of epoch "
                         f"numbers, got {validation_freq!r}")
    if validation_split and validation_data is not None:
        raise InvalidArgumentError("give validation_data or validation_split, not both")
    if validation_split:
        if x is None:
            raise InvalidArgumentError("validation_split takes the last samples of x and y: give arrays "
                             "(with a dataset_fn, pass validation_data)")
        x, y = np.asarray(x), np.asarray(y)
        keep = len(x) - int(len(x) * validation_split)
        if keep < 1 or keep == len(x):
            raise InvalidArgumentError(f"validation_split={validation_split} of {len(x)} samples leaves "
                             "no training or no validation samples")
        return x[:keep], y[:keep], Validation(x[keep:], y[keep:], freq=validation_freq)
    if validation_data is None:
        return x, y, None
    if isinstance(validation_data, tuple | list):
        if len(validation_data) != 2:
            raise InvalidArgumentError("validation_data is (x_val, y_val) or a tf.data.Dataset of "
                             "(images, labels) batches")
        xv, yv = (np.asarray(a) for a in validation_data)
        return x, y, Validation(xv, yv, freq=validation_freq)
    return x, y, Validation(dataset=validation_data, freq=validation_freq)
