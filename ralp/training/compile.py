"""What a model trains with, for every trainer (PS, RALP, Horovod): the user's set-up first.

- A compiled model brings its optimizer, loss and metrics (``model.compile(...)``); ``wrap``
  and the Horovod trainers use them unless given others.
- The default loss matches the model's output: sparse categorical cross-entropy on logits,
  or on probabilities when the output layer ends in a softmax (``keras.applications``
  classifiers do; taking their output for logits would make Keras warn and fall back).
- Labels are integer class ids (sparse), as for the zoo and the bench; ``"accuracy"`` means
  sparse categorical accuracy.
- One output: the trainers compute one loss on one output tensor. A model with several
  outputs is refused with a message that says what to do.

Metrics are computed per batch, statelessly (``Metric.stateless_update_state`` from the
metric's initial state), where the batch's predictions are: the trainers report their mean
over an epoch's batches (Keras' epoch value for mean metrics such as accuracy; for metrics
such as AUC, the mean of per-batch values).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import keras

from ralp._compat import inbound_nodes, keras_history
from ralp.errors import InvalidTypeError, RalpError

# Layers and keras.ops nodes between a softmax and the model output that change no values.
_PASS_THROUGH = frozenset({"Reshape", "Flatten", "Dropout", "Identity", "Activation"})


class TrainingSetupError(RalpError, ValueError):
    """The model or its compiled set-up cannot be trained as given; the message says why."""


def check_one_output(model, where: str = "ralp") -> None:
    """Refuse a model with several outputs: the trainers compute one loss on one output."""
    outputs = getattr(model, "outputs", None) or []
    if len(outputs) > 1:
        raise TrainingSetupError(
            f"{where}: model {model.name!r} has {len(outputs)} outputs; ralp's trainers compute "
            "one loss on one output. Train a single-output model, e.g. "
            "keras.Model(model.inputs, model.outputs[0]) (ralp.profile still profiles the "
            "model as it is)."
        )


def _ends_in_softmax(op) -> bool:
    activation = getattr(op, "activation", None)
    return type(op).__name__ == "Softmax" or activation is keras.activations.softmax


def outputs_probabilities(model) -> bool:
    """Whether the model's (single) output comes from a softmax: probabilities, not logits.

    Looks at the layer producing the output, back through reshapes, flattens, dropout and
    linear activations after it, and into a nested model's own output.
    """
    tensor = model.outputs[0]
    while True:
        op, node_index, _ = keras_history(tensor)
        if _ends_in_softmax(op):
            return True
        if isinstance(op, keras.Model):
            return outputs_probabilities(op)
        kind = type(op).__name__
        linear = getattr(op, "activation", keras.activations.linear) is keras.activations.linear
        inputs = inbound_nodes(op)[node_index].input_tensors
        if kind not in _PASS_THROUGH or not linear or len(inputs) != 1:
            return False
        tensor = inputs[0]


def default_loss(model) -> keras.losses.Loss:
    """Sparse categorical cross-entropy, on logits or on the softmax's probabilities."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=not outputs_probabilities(model))


@dataclass(frozen=True)
class _MeanOverBatch:
    """A per-sample loss function reduced as Keras reduces a compiled loss function
    ("sum_over_batch_size": the mean; Keras' own wrapper class is not public)."""

    fn: Callable

    def __call__(self, y_true, y_pred):
        return keras.ops.mean(self.fn(y_true, y_pred))


def _resolve_loss(loss, model) -> Callable:
    if isinstance(loss, str) and loss.lower() in ("crossentropy", "ce"):
        return default_loss(model)
    resolved = keras.losses.get(loss)
    if isinstance(resolved, keras.losses.Loss):
        return resolved
    if callable(resolved):  # a loss function: per-sample values, averaged as a Loss does
        return _MeanOverBatch(resolved)
    raise TrainingSetupError(f"cannot use {loss!r} as a loss; give a keras loss or its name")


def _resolve_metric(metric) -> keras.metrics.Metric:
    if isinstance(metric, str) and metric.lower() in ("accuracy", "acc"):
        return keras.metrics.SparseCategoricalAccuracy(name=metric)
    resolved = keras.metrics.get(metric)
    if isinstance(resolved, keras.metrics.Metric):
        return resolved
    if callable(resolved):
        name = metric if isinstance(metric, str) else getattr(resolved, "__name__", None)
        return keras.metrics.MeanMetricWrapper(resolved, name=name)
    raise TrainingSetupError(f"cannot use {metric!r} as a metric; give a keras metric or its name")


def _compiled_metrics(model) -> list:
    metrics = (model.get_compile_config() or {}).get("metrics") or []
    if isinstance(metrics, dict):  # per output name; one output here
        metrics = [m for value in metrics.values() for m in (value if isinstance(value, list)
                                                             else [value])]
    return list(metrics) if isinstance(metrics, list | tuple) else [metrics]


@dataclass(frozen=True)
class TrainingSetup:
    """What a trainer trains ``model`` with, and where each piece came from."""

    optimizer: object  # an optimizer, its name, or None (the trainer's default)
    loss: Callable  # loss(y_true, y_pred) -> scalar
    metrics: tuple[keras.metrics.Metric, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)  # piece -> argument|compile|default

    @property
    def metric_names(self) -> list[str]:
        return [m.name for m in self.metrics]


def training_setup(model, optimizer=None, loss=None, metrics: Sequence | None = None,
                   where: str = "ralp") -> TrainingSetup:
    """The set-up to train ``model`` with: the arguments given, else the model's compiled
    optimizer, loss and metrics, else the defaults (a ``None`` optimizer: the trainer's own;
    the loss: :func:`default_loss`; no metrics beyond the trainers' loss and accuracy)."""
    check_one_output(model, where)
    compiled = bool(getattr(model, "compiled", False))
    sources = {}
    if optimizer is None and compiled and getattr(model, "optimizer", None) is not None:
        optimizer, sources["optimizer"] = model.optimizer, "compile"
    else:
        sources["optimizer"] = "argument" if optimizer is not None else "default"
    if loss is None and compiled and getattr(model, "loss", None) is not None:
        loss, sources["loss"] = model.loss, "compile"
    elif loss is not None:
        sources["loss"] = "argument"
    else:
        sources["loss"] = "default"
    if isinstance(loss, dict | list | tuple):  # per output: one output here
        values = list(loss.values()) if isinstance(loss, dict) else list(loss)
        if len(values) != 1:
            raise TrainingSetupError(f"{where}: one loss expected for one output, got {loss!r}")
        loss = values[0]
    resolved_loss = default_loss(model) if loss is None else _resolve_loss(loss, model)
    if metrics is None and compiled:
        metrics, sources["metrics"] = _compiled_metrics(model), "compile"
    else:
        sources["metrics"] = "argument" if metrics is not None else "default"
    resolved = tuple(_resolve_metric(m) for m in (metrics or ()))
    return TrainingSetup(optimizer, resolved_loss, resolved, sources)


class BatchMetrics:
    """Per-batch values of ``metrics`` inside a traced step, from their initial state (no
    variables are read or written: the step may run on any task of a cluster)."""

    def __init__(self, metrics: Sequence[keras.metrics.Metric]):
        self.metrics = tuple(metrics)
        # The initial state as constants, read now (before any cluster connection).
        self._initial = [[v.numpy() for v in m.variables] for m in self.metrics]

    def __call__(self, y_true, y_pred) -> list:
        values = []
        for metric, initial in zip(self.metrics, self._initial, strict=True):
            state = metric.stateless_update_state(
                [keras.ops.convert_to_tensor(v) for v in initial], y_true, y_pred
            )
            values.append(metric.stateless_result(state))
        return values


def optimizer_factory(template) -> Callable[[], keras.optimizers.Optimizer]:
    """A maker of fresh optimizers like ``template`` (an instance, a name such as "adam", or
    None for SGD with momentum). Reads the template's config now: an optimizer made before
    a process connected to a cluster cannot be read afterwards."""
    if template is None:
        return lambda: keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
    if isinstance(template, str):
        keras.optimizers.get(template)  # fail early on an unknown name
        return lambda: keras.optimizers.get(template)
    if isinstance(template, keras.optimizers.Optimizer):
        cls, config = template.__class__, template.get_config()
        return lambda: cls.from_config(config)
    if callable(template):
        return template
    raise InvalidTypeError(
        f"optimizer must be a keras optimizer or its name, got {type(template).__name__}"
    )


def check_training_arrays(x, y, model, where: str = "fit") -> None:
    """Refuse arrays a step would fail on, or train to nonsense with, before anything runs:
    images with NaN or infinite values, labels that are not integer class ids of ``model``'s
    output (``0 <= label < classes``), and a different number of images and labels."""
    import numpy as np

    x, y = np.asarray(x), np.asarray(y)
    if len(x) != len(y):
        raise TrainingSetupError(f"{where}: {len(x)} images but {len(y)} labels; give one "
                                 "label per image")
    if np.issubdtype(x.dtype, np.number) and not np.isfinite(x).all():
        bad = int(x.size - np.isfinite(x).sum())
        raise TrainingSetupError(f"{where}: the images hold {bad} NaN or infinite values; "
                                 "clean or impute them first (training would reach a NaN loss)")
    whole = np.issubdtype(y.dtype, np.floating) and bool(np.all(np.mod(y, 1) == 0))
    if not np.issubdtype(y.dtype, np.integer) and not whole:
        raise TrainingSetupError(f"{where}: labels must be integer class ids, got {y.dtype} "
                                 f"values such as {y.flat[0]!r}")
    classes = int(model.outputs[0].shape[-1])
    low, high = (int(y.min()), int(y.max())) if y.size else (0, 0)
    if low < 0 or high >= classes:
        outside = int(np.sum((y < 0) | (y >= classes)))
        raise TrainingSetupError(
            f"{where}: {outside} labels lie outside [0, {classes}) (found {low}..{high}); "
            f"{model.name!r} has {classes} output classes: labels are class ids 0..{classes - 1}"
        )


def evaluate_model(model, loss_fn, metrics: BatchMetrics, x, y,
                   batch_size: int = 256) -> dict[str, float]:
    """Loss, accuracy and the metrics of ``model`` on ``x``, ``y`` in this process."""
    import numpy as np

    y = np.asarray(y)
    logits = model.predict(np.asarray(x), batch_size=batch_size, verbose=0)
    out = {"loss": float(loss_fn(y, logits)),
           "accuracy": float(np.mean(np.argmax(logits, -1) == y.reshape(-1)))}
    for metric, value in zip(metrics.metrics, metrics(y, logits), strict=True):
        out[metric.name] = float(value)
    return out
