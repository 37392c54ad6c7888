"""The data ``fit`` trains on, in the forms Keras users give it, and each worker's share.

Three forms: arrays (``x``, ``y``, and ``sample_weight`` or ``class_weight``), a finite
``tf.data.Dataset`` of batches (``(x, y)`` or ``(x, y, sample_weight)``), or a *dataset
function* ``fn(input_context) -> tf.data.Dataset`` that makes one worker's own batches
(``tf.distribute.InputContext``: ``input_pipeline_id`` is the worker, ``num_input_pipelines``
the workers, and ``get_per_replica_batch_size(batch)`` one worker's part of a batch).

``batch_size`` is the *global* batch, Keras' distribution convention: the samples behind one
update of the weights. A synchronous step (BSP, horovod, collective, stanza) splits it over
the workers; an asynchronous step (the PS modes' default, ASP, SSP, DSSP) is one worker's
batch and one update of its own. Each worker reads its own share:

- **arrays, synchronous**: every epoch is a pass over a fresh permutation of all rows (the
  rows in order with ``shuffle=False``), cut into global batches (the last one smaller),
  each split over the workers as evenly as possible (sizes differ by at most one; a worker
  may get no rows of a small last batch). Every sample is used once per epoch. With
  ``drop_remainder`` (stanza, whose FC ranks stack a fixed number of rows) the last partial
  batch of each pass is left out, of arrays and of a dataset alike.
- **arrays, asynchronous**: the same global batches as one Keras process (every epoch's
  permutation, shared, cut into batches of ``batch_size``, the last one smaller), batch k of
  an epoch dealt to worker k mod W whole. An epoch is its batches; a faster worker may start
  its next epoch's batches before a slower one ends. (Cutting each worker's own shard
  instead would leave W small last batches per epoch, each a whole update from a few rows.)
- **a dataset**: each batch is one global batch; synchronous steps split it over the
  workers as above, asynchronous steps give batch k to worker k mod W whole (tf.data's
  ``AutoShardPolicy.DATA``: every worker reads the whole pipeline and keeps its part). An
  epoch is one pass over the dataset (its length must be known: ``cardinality``), or
  ``steps_per_epoch`` steps, the dataset going on where the last epoch stopped.
- **a dataset function**: each worker's batches as the function makes them (shard by the
  input context to read less); an epoch is ``steps_per_epoch`` steps.

``x`` is in the model's own form (:mod:`ralp.training.features`): one array or tensor, or
for a model of several inputs a tuple or dict of them, whose rows go to a worker together. A
worker's batches are ``(x, y, rows)`` or ``(x, y, sample_weight, rows)``: ``rows`` is how
many of the batch's rows are its own. It is all of them, except where a synchronous step
leaves a worker no rows (a small last batch): that worker then gets a stand-in (the batch's
first row), which it runs forward and backward and leaves out of the loss and the metrics,
since a convolution on an empty batch fails with TensorFlow's default oneDNN kernels on
CPUs. Every worker's dataset is endless (repeated) and starts ``skip`` batches in, the data
position of a restored checkpoint. ``worker`` may be a tensor: under the parameter-server
modes' own schedule every worker runs the same dataset function, which asks for its worker
(``tf.distribute.coordinator.experimental_get_current_worker_index``). For a parameter-server cluster it is built on the worker
(``remote``): arrays travel as constants of the dataset's graph, a dataset as its serialized
graph (one holding Python code, ``from_generator`` or ``py_function``, cannot travel: give a
dataset function that reads files instead).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from ralp._compat import rows_of_predictions
from ralp.errors import InvalidArgumentError

DatasetFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]


@dataclass(frozen=True)
class Sharding:
    """How a fit's batches go to workers: ``workers`` read data; ``synchronous`` steps split
    each global batch over them; ``drop_remainder`` keeps full batches only."""

    workers: int
    synchronous: bool
    drop_remainder: bool = False

    def context(self, worker) -> tf.distribute.InputContext:
        """A dataset function's input context on ``worker`` (an int, or a tensor where the
        worker is known only when the function runs there): a synchronous step's batch is
        shared by every worker, an asynchronous one is the worker's own."""
        return tf.distribute.InputContext(self.workers, worker,
                                          self.workers if self.synchronous else 1)


def split_bounds(rows: int, workers: int, worker: int) -> tuple[int, int]:
    """``worker``'s rows [start, end) of a batch of ``rows``, split as evenly as possible."""
    return worker * rows // workers, (worker + 1) * rows // workers


def _index(worker) -> tf.Tensor:
    return tf.cast(worker, tf.int64)


def batch_rows(x, out_type=tf.int32):
    """The rows of a batch's features ``x`` (a tensor, or the tensors of several inputs)."""
    return tf.shape(tf.nest.flatten(x)[0], out_type=out_type)[0]


def _with_rows(*batch):
    """A whole batch, every row its own: ``(*batch, rows)``."""
    return (*batch, batch_rows(batch[0]))


def _own_rows(batch, worker, workers: int):
    """``worker``'s rows of every tensor of a batch (a tuple; its features may be several
    tensors), by :func:`split_bounds`, and how many are its own: a worker left none gets the
    batch's first row as a stand-in."""
    rows = batch_rows(batch[0], tf.int64)
    w = _index(worker)
    start, end = w * rows // workers, (w + 1) * rows // workers
    own = tf.cast(end - start, tf.int32)
    stand_in = tf.logical_and(tf.equal(own, 0), rows > 0)
    start = tf.where(stand_in, tf.constant(0, tf.int64), start)
    end = tf.where(stand_in, tf.constant(1, tf.int64), end)
    return (*tf.nest.map_structure(lambda t: t[start:end], tuple(batch)), own)


def unpack(batch) -> tuple:
    """``(x, y, sample_weight or None, rows)`` of a worker's batch: ``(x, y, rows)`` or
    ``(x, y, sample_weight, rows)``; ``x`` in the model's own form (one tensor, or a tuple or
    dict of the inputs' tensors: :mod:`ralp.training.features`)."""
    return batch[0], batch[1], batch[2] if len(batch) > 3 else None, batch[-1]


def own(rows, y, predictions, weights) -> tuple:
    """The labels, predictions and weights of a batch's own rows (not a stand-in). A softmax's
    output keeps its logits (Keras' cross-entropy computes from them, unclipped)."""
    return (y[:rows], rows_of_predictions(predictions, rows),
            None if weights is None else weights[:rows])


def _as_tuple(*element):
    return tuple(element) if len(element) > 1 else tuple(element[0])


def _spec(array: np.ndarray) -> tf.TensorSpec:
    return tf.TensorSpec((None, *array.shape[1:]), tf.as_dtype(array.dtype))


class ArrayData:
    """In-memory ``x`` (an array, or a tuple or dict of arrays for a model of several
    inputs), ``y`` and optional per-sample ``weights``, batched by the fit."""

    def __init__(self, x, y, weights, batch_size: int, shuffle: bool, steps: int | None = None):
        self.x, self.y, self.weights = x, y, weights
        self.batch_size, self.shuffle, self.steps = batch_size, shuffle, steps
        self.rows = len(y)
        self.global_batch = batch_size
        # The arrays as tensors of this process, made here, eagerly. The map function of a
        # worker's dataset captures them as its inputs, which reach the worker as tensors; as
        # constants of its graph, the worker's graph optimizer went through every byte of
        # them, for the function and again for the dataset's graph.
        arrays = (x, y) + (() if weights is None else (weights,))
        self._tensors = tf.nest.map_structure(tf.constant, arrays)
        w = () if weights is None else (tf.TensorSpec((None,), tf.float32),)
        self.element_spec = (tf.nest.map_structure(_spec, x), _spec(y), *w)

    def worker_batch(self, sharding: Sharding) -> int:
        """One worker's rows of a full batch (a synchronous step's share of it)."""
        return self.batch_size // sharding.workers if sharding.synchronous else self.batch_size

    def steps_per_epoch(self, sharding: Sharding) -> int:
        """``steps_per_epoch`` if given, else one pass (the module's docstring)."""
        return self.steps or self.pass_steps(sharding)

    def pass_steps(self, sharding: Sharding) -> int:
        B = self.batch_size
        if sharding.synchronous and sharding.drop_remainder:
            return _full_batches(self.rows // B, f"{self.rows} samples", B)
        return math.ceil(self.rows / B)

    def _gather(self, indices, own):
        return (*tf.nest.map_structure(lambda t: tf.gather(t, indices), self._tensors), own)

    def _epoch_order(self, seed: int, e) -> tf.Tensor:
        """Epoch ``e``'s order of the rows: a permutation every worker draws alike from the
        shared ``seed`` (the rows in order with ``shuffle=False``)."""
        rows = tf.range(self.rows, dtype=tf.int64)
        if not self.shuffle:
            return rows
        return tf.random.experimental.stateless_shuffle(
            rows, seed=tf.stack([tf.cast(seed, tf.int64), e]))

    def _indices(self, sharding: Sharding, worker, seed: int) -> tf.data.Dataset:
        """Every epoch's global batches, as one Keras process cuts them from the epoch's
        order: a synchronous step's batch split over the workers, an asynchronous one's batch
        k dealt to worker k mod W whole."""
        B, W, N = self.batch_size, sharding.workers, self.rows
        steps = self.pass_steps(sharding)
        sizes = tf.constant([min(B, N - k * B) for k in range(steps)], tf.int64)
        w = _index(worker)

        def epoch(e):
            order = self._epoch_order(seed, e)

            def batch(k):
                return order[k * B:k * B + sizes[k]]

            if sharding.synchronous:
                return tf.data.Dataset.range(steps).map(
                    lambda k: _own_rows((batch(k),), w, W))
            return tf.data.Dataset.range(w, steps, W).map(
                lambda k: (batch(k), tf.cast(sizes[k], tf.int32)))

        return tf.data.Dataset.range(2**62).flat_map(epoch)

    def worker_dataset(self, sharding: Sharding, worker, *, seed: int, skip: int = 0,
                       remote: bool = False) -> tf.data.Dataset:
        return self._indices(sharding, worker, seed).skip(skip).map(self._gather).prefetch(2)


def _full_batches(full: int, what: str, batch: int) -> int:
    if full < 1:
        raise InvalidArgumentError(f"stanza trains full global batches only, and {what} make "
                                   f"no batch of {batch}: give more samples or a smaller "
                                   "batch_size")
    return full


class DatasetData:
    """A finite ``tf.data.Dataset`` of batches, each one global batch. ``one_pass``: an
    epoch is one pass over it (``steps`` is its length), not ``steps_per_epoch`` steps."""

    def __init__(self, dataset: tf.data.Dataset, steps: int | None, global_batch: int | None,
                 one_pass: bool = False):
        self.dataset = dataset
        self.element_spec = tuple(dataset.element_spec)
        self.steps = steps
        self.global_batch = global_batch
        self.one_pass = one_pass
        self._full: int | None = None  # one pass's full batches, once counted
        self._graph = None  # the serialized dataset, for workers of a PS cluster

    def steps_per_epoch(self, sharding: Sharding) -> int:
        """``steps_per_epoch`` if given, else one pass; with ``drop_remainder`` a pass's last
        batch is left out when it is partial, as of arrays."""
        if sharding.drop_remainder and self.one_pass and self.global_batch:
            return self.full_batches()
        return self.steps

    def full_batches(self) -> int:
        """One pass's full batches: every batch when their size is static (batched with
        ``drop_remainder=True``), else the pass's batches less a partial last one (read here:
        the dataset is read through once, the batches before it included)."""
        if self._full is None:
            rows = tf.nest.flatten(self.element_spec[0])[0].shape[0]
            full = self.steps
            if rows is None:
                last = next(iter(self.dataset.skip(self.steps - 1).take(1)))
                full -= int(batch_rows(_as_tuple(*last)[0])) < self.global_batch
            self._full = _full_batches(full, f"{self.steps} batches", self.global_batch)
        return self._full

    def worker_batch(self, sharding: Sharding) -> int | None:
        if self.global_batch is None:
            return None
        return self.global_batch // sharding.workers if sharding.synchronous else \
            self.global_batch

    def serialize(self) -> None:
        """Serialize the dataset for the workers of a PS cluster, here (eagerly: a dataset
        made on the coordinator cannot be read from a worker's function)."""
        from ralp._compat import dataset_graph

        if self._graph is None:
            self._graph = dataset_graph(self.dataset)

    def _source(self, remote: bool) -> tf.data.Dataset:
        if not remote:
            return self.dataset
        from ralp._compat import dataset_from_graph

        self.serialize()
        return dataset_from_graph(self._graph, self.dataset.element_spec)

    def worker_dataset(self, sharding: Sharding, worker, *, seed: int, skip: int = 0,
                       remote: bool = False) -> tf.data.Dataset:
        ds, W = self._source(remote), sharding.workers
        if sharding.drop_remainder and self.global_batch:
            full = self.global_batch
            ds = ds.filter(lambda *t: batch_rows(_as_tuple(*t)[0]) == full)
        if sharding.synchronous:
            ds = ds.map(lambda *t: _own_rows(_as_tuple(*t), worker, W))
        else:
            ds = (ds.shard(W, _index(worker)) if W > 1 else ds).map(
                lambda *t: _with_rows(*_as_tuple(*t)))
        return ds.repeat().skip(skip).prefetch(2)


class FunctionData:
    """A dataset function: each worker's own batches (``batch``: their static size, if the
    function's dataset has one)."""

    def __init__(self, fn: DatasetFn, steps: int, element_spec):
        self.fn, self.steps, self.element_spec = fn, steps, tuple(element_spec)

    def steps_per_epoch(self, sharding: Sharding) -> int:
        return self.steps

    def worker_batch(self, sharding: Sharding) -> int | None:
        """The static size of the batches the function makes for a worker of ``sharding``
        (traced with that input context), or None."""
        context = sharding.context(0)
        dataset = tf.function(lambda: self.fn(context)).get_concrete_function().structured_outputs
        first = tf.nest.flatten(dataset.element_spec)[0]
        return int(first.shape[0]) if first.shape.rank and first.shape[0] is not None else None

    def worker_dataset(self, sharding: Sharding, worker, *, seed: int, skip: int = 0,
                       remote: bool = False) -> tf.data.Dataset:
        ds = self.fn(sharding.context(worker)).map(lambda *t: _with_rows(*_as_tuple(*t)))
        return ds.repeat().skip(skip)


TrainingData = ArrayData | DatasetData | FunctionData


def _class_table(class_weight, classes: int) -> np.ndarray:
    if not isinstance(class_weight, dict) or not class_weight:
        raise InvalidArgumentError(f"class_weight must be a dict {{class id: weight}}, got "
                                   f"{class_weight!r}")
    table = np.ones(max(classes, int(max(class_weight)) + 1), np.float32)
    for k, v in class_weight.items():
        table[int(k)] = v
    return table


def class_weights(class_weight: dict, y: np.ndarray, classes: int) -> np.ndarray:
    """Per-sample weights from ``class_weight`` ({class id: weight}, 1 for a class it leaves
    out), as Keras' ``fit`` makes them: each sample weighs its class's weight (a one-hot
    label's class is its argmax; a binary label's, its rounded value)."""
    labels = np.asarray(y)
    if labels.ndim > 1 and labels.shape[-1] > 1:
        ids = np.argmax(labels, -1)
    else:
        ids = np.round(labels.reshape(len(labels), -1)[:, 0]).astype(np.int64)
    return _class_table(class_weight, max(classes, 2))[ids]


def class_weight_map(class_weight: dict, classes: int):
    """A ``Dataset.map`` function adding :func:`class_weights` to batches of (x, y)."""
    table = _class_table(class_weight, max(classes, 2))

    def add(*element):
        x, y = _as_tuple(*element)[:2]
        if y.shape.rank and y.shape.rank > 1 and y.shape[-1] != 1:
            ids = tf.argmax(y, -1)
        else:
            ids = tf.cast(tf.round(tf.reshape(tf.cast(y, tf.float32), [tf.shape(y)[0], -1])[:, 0]),
                          tf.int64)
        return x, y, tf.gather(tf.constant(table), ids)

    return add
