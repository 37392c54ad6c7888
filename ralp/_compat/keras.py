"""Private Keras APIs: functional graphs, optimizers, compile's loss and metrics (see the table in
:mod:`ralp._compat`)."""

from __future__ import annotations

import types

from ralp._compat._checks import _require

# ------------------------------------------------------------------ Keras functional graphs


def is_functional(model) -> bool:
    """Whether ``model`` is a functional model (Keras exports no public class for it)."""
    import keras

    functional = _require(keras.src.models.functional, "Functional", "recognise functional models")
    return isinstance(model, functional)


def inbound_nodes(operation) -> list:
    """The graph nodes at which ``operation`` (a layer or a ``keras.ops`` node) was called."""
    return _require(operation, "_inbound_nodes", "walk a functional model's graph")


def keras_history(tensor) -> tuple:
    """``(operation, node_index, tensor_index)`` of the call that produced a symbolic tensor."""
    return tuple(_require(tensor, "_keras_history", "find the producer of a symbolic tensor"))


# ------------------------------------------------------------------ optimizers


def _update_where_each_variable_lives(self, grads, trainable_variables, learning_rate):
    import tensorflow as tf

    for grad, var in zip(grads, trainable_variables, strict=True):
        with tf.device(variable_device(var)):
            self.update_step(grad, var, learning_rate)


def _decay_where_each_variable_lives(self, variables):
    import tensorflow as tf

    if self.weight_decay is None:
        return
    use_weight_decay = _require(self, "_use_weight_decay", "apply weight decay per variable")
    for var in variables:
        if use_weight_decay(var):
            with tf.device(variable_device(var)):
                lr = tf.cast(self.learning_rate, var.dtype)
                wd = tf.cast(self.weight_decay, var.dtype)
                var.assign(var - var * wd * lr)


def variable_device(variable) -> str:
    """The device string of a Keras or TF variable (a Keras variable's backing one)."""
    import keras

    return (variable.value if isinstance(variable, keras.Variable) else variable).device


def update_where_variables_live(optimizer):
    """Make a Keras 3 (TF backend) optimizer update each variable on that variable's task.

    ``TFOptimizer._backend_update_step`` all-reduces the gradients in the replica context and
    applies them through ``merge_call``: under PSS the result lands on the worker (RALP's tail
    gradient would go PS -> worker -> PS), and a ``merge_call`` inside
    ``CriticalSection.execute`` deadlocks. With one replica per worker the all-reduce is the
    identity: each update runs directly, under its variable's device. Rebinds
    ``_backend_update_step`` and ``_apply_weight_decay`` on this instance."""
    for name in ("_backend_update_step", "_apply_weight_decay"):
        _require(type(optimizer), name, "update each variable where it lives")
    optimizer._backend_update_step = types.MethodType(_update_where_each_variable_lives, optimizer)
    optimizer._apply_weight_decay = types.MethodType(_decay_where_each_variable_lives, optimizer)
    return optimizer


def _gradients_as_given(self, grads_and_vars):
    return list(grads_and_vars)


def apply_summed_gradients(optimizer):
    """Make a Keras 3 (TF backend) optimizer apply the gradients it is given as they are.

    ``TFOptimizer._backend_update_step`` sums the gradients over the replicas first
    (``_all_reduce_sum_gradients``: one all-reduce of the whole list in the replica context,
    which waits for the end of the backward pass). A caller that has summed them itself, bucket
    by bucket as the backward pass produced them, must not have them summed again. Rebinds
    ``_all_reduce_sum_gradients`` on this instance to return the gradients unchanged; the
    update itself (``_distributed_tf_update_step``) is Keras' own."""
    _require(type(optimizer), "_all_reduce_sum_gradients", "apply gradients summed already")
    _require(type(optimizer), "_backend_update_step", "apply gradients summed already")
    optimizer._all_reduce_sum_gradients = types.MethodType(_gradients_as_given, optimizer)
    return optimizer


def _atomic_assign_add(self, value):
    import tensorflow as tf

    return self.value.assign_add(tf.cast(value, self.dtype))


def count_updates_atomically(optimizer):
    """Make the optimizer count its updates with one atomic add on the counter's task.

    Keras 3's ``Variable.assign_add`` is ``assign(self + value)``, a read then a write: when
    workers update at once (asynchronous schedules) two read the same count and one increment
    is lost, and the count drives learning-rate schedules and Adam's bias correction.
    ``tf.Variable.assign_add`` is one ``AssignAddVariableOp``, which holds the variable's lock.
    Rebinds ``assign_add`` of the private ``_iterations`` counter (the public ``iterations``
    may be derived under gradient accumulation)."""
    counter = _require(optimizer, "_iterations", "count optimizer updates atomically")
    counter.assign_add = types.MethodType(_atomic_assign_add, counter)
    return optimizer


def slot_variables(optimizer, variable) -> list:
    """The optimizer's slot variables of ``variable`` (Adam's m and v, SGD's momentum)."""
    return list(optimizer_slots(optimizer, [variable])[0].values())


def optimizer_slots(optimizer, variables) -> list[dict[str, object]]:
    """For each of ``variables``, the optimizer's slot variables of it by slot name
    (``{"momentum": ..., "velocity": ...}``); variables it holds no slot of get ``{}``.

    Keras names a slot ``{optimizer}/{variable path with '/' -> '_'}_{slot name}``
    (``BaseOptimizer.add_variable_from_reference``); there is no public query by variable.
    One variable's prefix can begin another's (``dense_kernel_`` and ``dense_kernel_bias_``),
    so each slot belongs to the variable of the longest prefix it starts with.
    """
    prefixes = sorted(((v.path.replace("/", "_") + "_", k) for k, v in enumerate(variables)),
                      key=lambda item: -len(item[0]))
    slots: list[dict[str, object]] = [{} for _ in variables]
    for slot in optimizer.variables:
        name = slot.path.split("/", 1)[-1]
        for prefix, k in prefixes:
            if name.startswith(prefix) and len(name) > len(prefix):
                slots[k][name[len(prefix):]] = slot
                break
    return slots


def learning_rate_variable(optimizer):
    """The variable holding the optimizer's learning rate, or None when a schedule (or a
    callable) computes it from the step count."""
    import keras

    rate = _require(optimizer, "_learning_rate", "read and set the learning rate")
    return rate if isinstance(rate, keras.Variable) else None


def initial_epoch_set_by_callbacks(model) -> int | None:
    """The epoch a callback asked ``fit`` to start from in ``on_train_begin``
    (``keras.callbacks.BackupAndRestore`` sets the model's ``_initial_epoch``), cleared."""
    epoch = getattr(model, "_initial_epoch", None)
    if hasattr(model, "_initial_epoch"):
        model._initial_epoch = None
    return epoch


# ------------------------------------------------------------------ compile's loss and metrics


def _keras_src(module: str, name: str, purpose: str):
    import importlib

    return _require(importlib.import_module(f"keras.src.{module}"), name, purpose)


def compile_metrics(metrics, weighted_metrics, y_true, y_pred):
    """The metric ``model.compile(metrics=..., weighted_metrics=...)`` builds, built for these
    labels and predictions (tensors or ``keras.KerasTensor`` specs): Keras' own metric
    objects, names (``weighted_`` prefixes) and use of sample weights."""
    cls = _keras_src("trainers.compile_utils", "CompileMetrics", "compute compiled metrics")
    compiled = cls(metrics, weighted_metrics)
    compiled.build(y_true, y_pred)
    return compiled


def compiled_loss(identifier, y_true, y_pred):
    """The ``keras.losses.Loss`` ``compile(loss=identifier)`` uses for these labels and
    predictions ("crossentropy": the binary, categorical or sparse one, by shape)."""
    return _keras_src("trainers.compile_utils", "get_loss", "resolve the compiled loss")(
        identifier, y_true, y_pred)


def rows_of_predictions(predictions, rows):
    """``predictions[:rows]``, keeping the logits Keras hangs on a softmax's output
    (``_keras_logits``): its cross-entropy then computes from the logits, as on the whole
    batch, instead of from clipped probabilities."""
    out = predictions[:rows]
    logits = getattr(predictions, "_keras_logits", None)
    if logits is not None:
        out._keras_logits = logits[:rows]
    return out


def same_rank(values, sample_weight):
    """Keras' alignment of loss values and sample weights (a trailing axis of 1 squeezed or
    added) before it multiplies them."""
    return _keras_src("losses.loss", "squeeze_or_expand_to_same_rank",
                      "weigh loss values as Keras does")(values, sample_weight)
