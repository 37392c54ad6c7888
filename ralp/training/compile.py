"""What a model trains with, in every mode: the user's compiled set-up first.

- A compiled model (``model.compile(...)``) brings its optimizer, loss, metrics and weighted
  metrics; ``ralp.wrap``'s ``optimizer=``, ``loss=`` and ``metrics=`` replace them.
- An uncompiled model gets ralp's defaults: SGD with momentum, sparse categorical
  cross-entropy on the model's logits (or on its probabilities when the output layer ends in
  a softmax, as ``keras.applications`` classifiers do), and the metric "accuracy".
- The loss and the metrics are resolved as Keras' ``compile`` resolves them on the first
  batch, from the labels' shape ("accuracy" is binary, categorical or sparse categorical
  accuracy; :mod:`ralp.training.objective`), when ``fit`` sees its data.
- One output: a model with several outputs is refused with a message that says what to do;
  so is a per-output ``loss_weights``, and a ``mixed_float16`` model (ralp applies no loss
  scaling; ``mixed_bfloat16`` needs none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import keras

from ralp._compat import inbound_nodes, keras_history
from ralp.errors import InvalidTypeError, RalpError
from ralp.profiler.trainable import several_outputs

# Layers and keras.ops nodes between a softmax and the model output that change no values.
_PASS_THROUGH = frozenset({"Reshape", "Flatten", "Dropout", "Identity", "Activation"})


class TrainingSetupError(RalpError, ValueError):
    """The model or its compiled set-up cannot be trained as given; the message says why."""


def check_one_output(model, where: str = "ralp") -> None:
    """Refuse a model with several outputs: the trainers compute one loss on one output
    (the message is :func:`ralp.profiler.trainable.several_outputs`', as everywhere)."""
    reason = several_outputs(model)
    if reason is not None:
        raise TrainingSetupError(f"{where}: {reason}")


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


def _compiled(model) -> dict:
    """The arguments ``model.compile`` was given (deserialized), or {}."""
    if not getattr(model, "compiled", False):
        return {}
    config = model.get_compile_config() or {}
    try:
        return dict(keras.saving.deserialize_keras_object(config)) if config else {}
    except (TypeError, ValueError):  # a custom object Keras cannot rebuild from its config
        return {"metrics": config.get("metrics"), "weighted_metrics":
                config.get("weighted_metrics"), "loss_weights": config.get("loss_weights")}


def _flat(metrics, where: str) -> list:
    """A list of metric identifiers (one output: a dict or nested list by output is flattened),
    a metric object as its config: the trainer makes its own from it where it trains (a
    metric's variables made before a parameter-server connection cannot be read after it)."""
    if metrics is None:
        return []
    if isinstance(metrics, dict):
        metrics = [m for value in metrics.values() for m in (value if isinstance(value, list)
                                                             else [value])]
    metrics = list(metrics) if isinstance(metrics, list | tuple) else [metrics]
    return [keras.saving.serialize_keras_object(m) if isinstance(m, keras.metrics.Metric) else m
            for m in metrics]


def _one_loss(loss, where: str):
    if isinstance(loss, dict | list | tuple):  # per output: one output here
        values = list(loss.values()) if isinstance(loss, dict) else list(loss)
        if len(values) != 1:
            raise TrainingSetupError(f"{where}: one loss expected for one output, got {loss!r}")
        return values[0]
    return loss


def check_precision(model, where: str) -> None:
    """Refuse float16 compute: its gradients need loss scaling, which ralp does not apply."""
    def layers(layer):
        yield layer
        for inner in getattr(layer, "layers", ()):
            yield from layers(inner)

    policies = {getattr(getattr(layer, "dtype_policy", None), "name", "")
                for layer in layers(model)}
    if any("float16" in p and "bfloat16" not in p for p in policies):
        raise TrainingSetupError(
            f"{where}: model {model.name!r} computes in float16 (mixed_float16), whose "
            "gradients need loss scaling, which ralp does not apply: build it with "
            "keras.mixed_precision.set_global_policy('mixed_bfloat16') (no scaling needed) or "
            "'float32'")


@dataclass(frozen=True)
class TrainingSetup:
    """What a trainer trains a model with, unresolved (Keras identifiers), and where each
    piece came from (``sources``: piece -> "argument" | "compile" | "default")."""

    optimizer: object  # an optimizer, its name, or None (ralp's default)
    loss: object  # a keras Loss, a loss function or its name
    metrics: tuple = ()
    weighted_metrics: tuple = ()
    sources: dict[str, str] = field(default_factory=dict)
    compile_config: dict | None = None  # the user's, to compile unwrap()'s model as they did


def training_setup(model, optimizer=None, loss=None, metrics: Sequence | None = None,
                   where: str = "ralp") -> TrainingSetup:
    """The set-up to train ``model`` with: the arguments given, else the model's compiled
    optimizer, loss and metrics, else the defaults (the module's docstring). Reads the
    compiled model now: under a parameter-server connection it could not be read later."""
    check_one_output(model, where)
    check_precision(model, where)
    compiled = _compiled(model)
    weights = compiled.get("loss_weights")
    if weights is not None and _flat(weights, where) not in ([1], [1.0]):
        raise TrainingSetupError(f"{where}: loss_weights={weights!r}: ralp trains one output "
                                 "with one loss; scale the loss itself (or the learning rate)")
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
        loss, sources["loss"] = default_loss(model), "default"
    weighted: list = []
    if metrics is None and compiled:
        metrics, sources["metrics"] = _flat(compiled.get("metrics"), where), "compile"
        weighted = _flat(compiled.get("weighted_metrics"), where)
    elif metrics is None:
        metrics, sources["metrics"] = ["accuracy"], "default"
    else:
        sources["metrics"] = "argument"
    config = model.get_compile_config() if compiled else None
    return TrainingSetup(optimizer, _one_loss(loss, where), tuple(_flat(metrics, where)),
                         tuple(weighted), sources, config)


def clone_uncompiled(model: keras.Model, **kwargs) -> keras.Model:
    """``keras.models.clone_model`` without compiling the clone. Keras compiles the clone of a
    compiled model from the original's compile config, which reads the optimizer's
    variables: unreadable once the process has connected to a cluster, and not wanted on a
    placed clone (the trainer makes its own optimizers). The user's model is left as it was."""
    compiled = getattr(model, "compiled", False)
    model.compiled = False
    try:
        return keras.models.clone_model(model, **kwargs)
    finally:
        model.compiled = compiled


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
