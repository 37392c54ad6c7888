"""The loss and metrics a model trains with, as sums that add up over workers and steps.

Keras' ``fit`` computes, per batch, the compiled loss (reduced over the batch: by default
the mean of the weighted per-sample values, "sum_over_batch_size") plus the model's own
losses (regularizers, ``add_loss``), and adds the batch to the compiled metrics' state. In
ralp's synchronous modes one update's batch is split over several workers (and a worker may
get no rows of a small last batch), so every worker computes its part as *sums*:

- ``num``: the sum of its rows' weighted loss values;
- ``den``: what Keras divides that sum by, for its rows: the number of loss values
  ("sum_over_batch_size", "mean"), the sum of the sample weights
  ("mean_with_sample_weight"), or its share of 1 ("sum": the update's workers add up to 1);
- ``samples``: its rows;
- ``reg``: its share of the model's own losses (the value times its share of the update);
- the metrics' state after adding its rows to their initial state.

Over the workers of one update, ``sum(num) / sum(den) + sum(reg)`` is the loss one Keras
process computes on the whole batch and ``sum(grad num) / sum(den) + grad reg`` its gradient;
the metrics' states add, since every built-in Keras metric accumulates sums (totals and
counts, confusion counts). :class:`EpochSums` turns the steps' sums into Keras' logs: the
epoch's loss is the mean of the steps' losses weighted by their samples, as Keras' loss
tracker weighs them, and each metric is its result on the summed state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import keras
import numpy as np

from ralp._compat import compile_metrics, compiled_loss, same_rank
from ralp.training.compile import TrainingSetupError

NUM, DEN, SAMPLES, REG, STATES = 0, 1, 2, 3, 4  # the layout of a step's sums vector
MEAN_REDUCTIONS = ("sum_over_batch_size", "mean")


def spec_of(shape: Sequence, dtype) -> keras.KerasTensor:
    """A symbolic tensor of ``shape`` (batch axis included, None where unknown)."""
    return keras.KerasTensor(tuple(shape), dtype=keras.backend.standardize_dtype(dtype))


class Objective:
    """The compiled loss and metrics of one model, resolved for labels and predictions like
    ``y_spec`` and ``pred_spec`` (``keras.KerasTensor`` s), as Keras' ``compile`` resolves
    them on its first batch ("accuracy" and "crossentropy" by the labels' shape)."""

    def __init__(self, loss, metrics: Sequence = (), weighted_metrics: Sequence = (), *,
                 y_spec, pred_spec, where: str = "ralp"):
        try:
            self.loss = compiled_loss(loss, y_spec, pred_spec)
        except (ValueError, TypeError) as e:
            raise TrainingSetupError(f"{where}: cannot use {loss!r} as the loss: {e}") from None
        self.reduction = getattr(self.loss, "reduction", "sum_over_batch_size")
        if self.reduction in (None, "none"):
            raise TrainingSetupError(
                f"{where}: the loss {self.loss.name!r} has reduction {self.reduction!r}: an "
                "unreduced loss cannot be trained on; use 'sum_over_batch_size' (Keras' "
                "default), 'sum', 'mean' or 'mean_with_sample_weight'")
        self.metrics = None
        self.names: list[str] = ["loss"]
        self._initial: list[np.ndarray] = []
        if metrics or weighted_metrics:
            metrics, weighted_metrics = _made(metrics), _made(weighted_metrics)
            try:
                self.metrics = compile_metrics(metrics or None, weighted_metrics or None, y_spec,
                                               pred_spec)
            except (ValueError, TypeError) as e:
                raise TrainingSetupError(f"{where}: cannot use the metrics {list(metrics)} / "
                                         f"weighted metrics {list(weighted_metrics)}: {e}") from None
            # The initial state as numpy, read now: the steps start every batch from it as
            # constants, on whichever task runs them.
            self._initial = [np.array(v.numpy()) for v in self.metrics.variables]
            self.names += list(self.metrics.stateless_result(self._initial_tensors()))
            if not all(np.issubdtype(a.dtype, np.number) for a in self._initial):
                raise TrainingSetupError(f"{where}: a metric keeps a state that is not numbers")
        self.state_sizes = [int(a.size) for a in self._initial]
        self.width = STATES + sum(self.state_sizes)

    def _initial_tensors(self) -> list:
        return [keras.ops.convert_to_tensor(a) for a in self._initial]

    # ------------------------------------------------------------------ inside a step

    def loss_sums(self, y, y_pred, sample_weight=None, share: float = 1.0):
        """``(num, den)`` of these rows (the module's docstring). ``share``: this worker's
        part of the update (1 / workers in a synchronous step), for the "sum" reduction."""
        import tensorflow as tf

        dtype = self.loss.dtype
        # as Loss.__call__ converts them (a softmax's output keeps its logits)
        y_pred = keras.ops.convert_to_tensor(y_pred, dtype=dtype)
        y = keras.ops.convert_to_tensor(y, dtype=dtype)
        values = tf.cast(self.loss.call(y, y_pred), dtype)
        if sample_weight is not None:
            weights = tf.cast(sample_weight, dtype)
            values, weights = same_rank(values, weights)
            values = values * weights
        num = tf.reduce_sum(values)
        if self.reduction in MEAN_REDUCTIONS or (
                self.reduction == "mean_with_sample_weight" and sample_weight is None):
            den = tf.cast(tf.size(values), dtype)
        elif self.reduction == "mean_with_sample_weight":
            den = tf.reduce_sum(tf.broadcast_to(weights, tf.shape(values)))
        else:  # "sum": the update's workers together divide by 1
            den = tf.constant(share, dtype)
        return num, den

    def metric_states(self, y, y_pred, sample_weight=None) -> list:
        """What these rows add to the metrics' state (their state after adding these rows to
        the initial state, less the initial state)."""
        if self.metrics is None:
            return []
        initial = self._initial_tensors()
        after = self.metrics.stateless_update_state(initial, y, y_pred,
                                                    sample_weight=sample_weight)
        return [new - old for new, old in zip(after, initial, strict=True)]

    def sums(self, num, den, samples, reg, states: Sequence):
        """One float32 vector ``[num, den, samples, reg, *states]`` (the step's result)."""
        import tensorflow as tf

        parts = [tf.reshape(tf.cast(v, tf.float32), [1]) for v in (num, den, samples, reg)]
        parts += [tf.reshape(tf.cast(s, tf.float32), [-1]) for s in states]
        return tf.concat(parts, axis=0)

    def batch_sums(self, y, y_pred, sample_weight=None, *, share: float = 1.0, reg=0.0):
        """:meth:`sums` of these rows: their loss sums, samples and metric states."""
        import tensorflow as tf

        num, den = self.loss_sums(y, y_pred, sample_weight, share)
        samples = tf.shape(y_pred)[0]
        return self.sums(num, den, samples, reg, self.metric_states(y, y_pred, sample_weight))

    # ------------------------------------------------------------------ on the host

    def results(self, states: np.ndarray) -> dict[str, float]:
        """Each metric's result on a summed state vector (the layout's tail)."""
        if self.metrics is None:
            return {}
        values, start = [], 0
        for initial, size in zip(self._initial, self.state_sizes, strict=True):
            part = np.asarray(states[start:start + size]).reshape(initial.shape)
            values.append(keras.ops.convert_to_tensor((initial + part).astype(initial.dtype)))
            start += size
        return {k: float(np.asarray(v)) for k, v in self.metrics.stateless_result(values).items()}


def _made(metrics: Sequence) -> list:
    """Metric identifiers, a config made into its metric here (a fresh one, with variables of
    this process)."""
    return [keras.saving.deserialize_keras_object(m) if isinstance(m, dict) else m
            for m in metrics]


def regularization(model) -> object:
    """The model's own losses (regularizers, ``add_loss``) summed as Keras' ``fit`` adds them
    to the compiled loss; 0 when it has none."""
    import tensorflow as tf

    losses = [tf.reduce_sum(tf.cast(loss, keras.backend.floatx())) for loss in model.losses]
    return tf.add_n(losses) if losses else tf.constant(0.0, keras.backend.floatx())


def regularization_gradients(model, variables) -> tuple:
    """``(regularization(model), its gradient for each of variables)``, None where a variable
    has no regularizer (every one, for a model without: nothing is added to its step)."""
    import tensorflow as tf

    if not model.losses:
        return tf.constant(0.0, keras.backend.floatx()), [None] * len(variables)
    with tf.GradientTape() as tape:
        reg = regularization(model)
    return reg, tape.gradient(reg, variables)


def plus(grad, reg_grad, scale: float = 1.0):
    """``grad`` plus ``scale`` x a regularizer's gradient (None: nothing to add)."""
    import tensorflow as tf

    return grad if reg_grad is None else grad + tf.cast(reg_grad, grad.dtype) * scale


def step_loss(sums: np.ndarray) -> float:
    """One update's loss from its summed sums: ``num / den + reg`` (0 / 0 is 0, as Keras'
    ``divide_no_nan``)."""
    den = float(sums[DEN])
    return (float(sums[NUM]) / den if den else 0.0) + float(sums[REG])


@dataclass
class EpochSums:
    """The running figures of an epoch: its updates' losses weighted by their samples, and the
    metrics' summed state. ``add`` takes one update's sums (summed over its workers)."""

    objective: Objective
    weighted_loss: float = 0.0
    samples: float = 0.0
    states: np.ndarray | None = None

    def add(self, update_sums: np.ndarray) -> None:
        sums = np.asarray(update_sums, np.float64)
        self.weighted_loss += step_loss(sums) * float(sums[SAMPLES])
        self.samples += float(sums[SAMPLES])
        tail = sums[STATES:]
        self.states = tail.copy() if self.states is None else self.states + tail

    def logs(self) -> dict[str, float]:
        """Keras' logs so far: ``loss`` and each metric."""
        loss = self.weighted_loss / self.samples if self.samples else 0.0
        states = self.states if self.states is not None else np.zeros(self.objective.width - STATES)
        return {"loss": loss, **self.objective.results(states)}

    def to_state(self) -> dict:
        """What a checkpoint keeps of it (JSON)."""
        return {"weighted_loss": self.weighted_loss, "samples": self.samples,
                "states": None if self.states is None else self.states.tolist()}

    def restore(self, saved: dict | None) -> None:
        saved = saved or {}
        self.weighted_loss = float(saved.get("weighted_loss", 0.0))
        self.samples = float(saved.get("samples", 0.0))
        states = saved.get("states")
        self.states = None if states is None else np.asarray(states, np.float64)
