"""Input pipelines of the PS trainer: arrays as a dataset function, and where iterators live.

A *dataset function* returns an endless ``tf.data.Dataset`` of ``(images, labels)`` batches; it
is called on the workers, so every batch is made where it is consumed. Under
ParameterServerStrategy's own schedule any idle worker takes the next batch from the
coordinator's per-worker dataset (:meth:`WorkerInputs.shared`); under a synchronization
paradigm each worker reads its own shard through an iterator made on it
(:meth:`WorkerInputs.per_worker`). Iterators are made once per dataset function and kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from ralp.errors import InvalidArgumentError

DatasetFn = Callable[..., tf.data.Dataset]


def numpy_dataset_fn(x, y, batch_size: int, shuffle: bool = True,
                     seed: int | None = None) -> DatasetFn:
    """A per-worker dataset function over in-memory arrays: repeated, batched, shuffled."""
    x, y = np.asarray(x), np.asarray(y)
    if len(x) != len(y):
        raise InvalidArgumentError(f"x and y differ in length: {len(x)} vs {len(y)}")
    if len(x) < batch_size:
        raise InvalidArgumentError(f"{len(x)} samples are fewer than one batch of {batch_size}")

    def dataset_fn(_context=None):
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        if shuffle:
            ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
        return ds.repeat().batch(batch_size, drop_remainder=True).prefetch(2)

    return dataset_fn


def skipping(dataset_fn: DatasetFn, skips: list[int]) -> DatasetFn:
    """``dataset_fn`` with worker w's dataset advanced past ``skips[w]`` batches (the data
    position of a restored checkpoint). A worker whose input context is unknown (the
    coordinator's shared per-worker dataset) skips ``skips[0]``: they are all alike there."""

    def advanced(context=None):
        w = context.input_pipeline_id if context is not None else 0
        dataset = dataset_fn(context) if context is not None else dataset_fn()
        return dataset.skip(skips[w]) if skips[w] else dataset

    return advanced


def worker_device(index: int) -> str:
    return f"/job:worker/replica:0/task:{index}"


class WorkerInputs:
    """The iterators of each dataset function, made once per function and kept.

    An entry holds its dataset function, so the function's ``id`` cannot be reused by
    another one while the entry lives.
    """

    def __init__(self, coordinator, num_workers: int):
        self.coordinator = coordinator
        self.num_workers = num_workers
        self._shared: dict[int, tuple[DatasetFn, Any]] = {}
        self._own: dict[int, tuple[DatasetFn, list]] = {}

    def shared(self, dataset_fn: DatasetFn):
        """The coordinator's per-worker iterator: whichever worker runs a step reads from it."""
        key = id(dataset_fn)
        if key not in self._shared:
            per_worker = self.coordinator.create_per_worker_dataset(dataset_fn)
            self._shared[key] = (dataset_fn, iter(per_worker))
        return self._shared[key][1]

    def per_worker(self, dataset_fn: DatasetFn) -> list:
        """Each worker's own iterator, made on that worker (its shard of the data)."""
        key = id(dataset_fn)
        if key not in self._own:
            W = self.num_workers
            iterators = []
            for w in range(W):
                with tf.device(f"{worker_device(w)}/device:CPU:0"):
                    context = tf.distribute.InputContext(W, w, W)
                    iterators.append(iter(dataset_fn(context)))
            self._own[key] = (dataset_fn, iterators)
        return self._own[key][1]
