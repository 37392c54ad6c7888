"""Per-batch training step functions, one plain PS and one RALP, with the same maths.

Both are ``tf.function``s named ``ralp_train_step`` (the audit finds their graphs by it),
scheduled by ``ClusterCoordinator`` on a worker; both return the
batch's mean loss, its number of correct predictions and the batch's value of each of the
user's metrics (``metrics_fn(labels, predictions)``, computed where the predictions are).

Plain PS: forward, loss, backward and the update's inputs are all computed on the worker;
every variable is read from and every gradient written to the PS tasks.

RALP: the worker runs the head (kept layers) and sends the boundary activations and the labels
to the PS. In one critical section on the PS that computes the loss, the PS runs the tail's
forward pass, the loss, the tail's backward pass and the tail's update, and returns the
boundary gradient. The worker finishes the backward pass through the head and updates it.

Loss placement: the loss is computed on the PS, next to the output layer (as Stanza does):
only the labels (4 bytes per sample) cross instead of the logits and their gradient (4 bytes
x classes per sample, 87 KB per sample at 21,841 classes).

Consistency: the critical section serialises the PS part of different workers' batches, so a
batch's backward pass and update see the weights its forward pass used. The section's outputs
depend on reads of every tail variable and optimizer slot taken after the update, so the lock
is released only when the update is done.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from ralp._compat import variable_device
from ralp.placement.plan import ps_device
from ralp.placement.rewriter import LayerDeviceFunction, PlacedModel, Split
from ralp.ps_strategy.pulls import BatchedPulls


def count_correct(labels, logits):
    labels = tf.reshape(tf.cast(labels, tf.int64), [-1])
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int64)
    return tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float32))


def _no_metrics(labels, predictions) -> list:
    return []


def forward(model, x, pulls: BatchedPulls | None, tape: tf.GradientTape):
    """``model(x)`` on the worker; with batched ``pulls``, on the pulled values (watched by
    ``tape``). Returns the outputs and what gradients are taken against."""
    if pulls is None:
        return model(x, training=True), model.trainable_variables
    trainable, non_trainable = pulls.values()
    tape.watch(trainable)
    outputs, state = model.stateless_call(trainable, non_trainable, x, training=True)
    pulls.assign_state(state)
    return outputs, trainable


def plain_step(strategy, model, optimizer, loss_fn, accumulators=None,
               pulls: BatchedPulls | None = None,
               metrics_fn: Callable = _no_metrics) -> Callable:  # fmt: skip
    """With ``accumulators`` (BSP) the step adds its gradients to them instead of updating;
    with ``pulls`` the variables are pulled in those batches (:mod:`ralp.ps_strategy.pulls`)."""
    variables = model.trainable_variables

    def replica_fn(x, y):
        with tf.GradientTape() as tape:
            logits, sources = forward(model, x, pulls, tape)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, sources)
        if accumulators is None:
            optimizer.apply_gradients(zip(grads, variables, strict=True))
        else:
            accumulate(accumulators, grads)
        return (loss, count_correct(y, logits), *metrics_fn(y, logits))

    @tf.function
    def ralp_train_step(iterator):
        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    return ralp_train_step


def ralp_step(
    strategy,
    placed: PlacedModel,
    split: Split,
    head_optimizer,
    tail_optimizer,
    loss_fn,
    critical_section: tf.CriticalSection,
    head_accumulators=None,
    tail_accumulators=None,
    pulls: BatchedPulls | None = None,
    metrics_fn: Callable = _no_metrics,
) -> Callable:
    """With accumulators (BSP) the step adds the head's and the tail's gradients to them
    instead of updating: the tail keeps its weights for the whole round, too. With ``pulls``
    the head's variables are pulled in those batches."""
    head, tail = split.head, split.tail
    head_vars, tail_vars = head.trainable_variables, tail.trainable_variables
    loss_device = ps_device(placed.loss_task, placed.device_type)
    device_fn = LayerDeviceFunction(placed.plan, loss_device, placed.device_type)
    # Everything the PS section writes; reading them last orders the lock release after it.
    written = [v.value for v in tail.variables] + [v.value for v in tail_optimizer.variables]
    written += list(tail_accumulators or [])

    def replica_fn(x, y):
        with tf.GradientTape() as tape:
            boundary, sources = forward(head, x, pulls, tape)
        boundary = list(boundary) if isinstance(boundary, list | tuple) else [boundary]

        def ps_section():
            on_ps = [tf.identity(a) for a in boundary]  # one copy of each activation to the PS
            labels = tf.identity(y)
            with tf.GradientTape() as ps_tape:
                ps_tape.watch(on_ps)
                logits = tail(on_ps if len(on_ps) > 1 else on_ps[0], training=True)
                logits = logits[0] if isinstance(logits, list | tuple) else logits
                loss = loss_fn(labels, logits)
            grads = ps_tape.gradient(loss, tail_vars + on_ps)
            if tail_accumulators is None:
                tail_optimizer.apply_gradients(zip(grads[: len(tail_vars)], tail_vars, strict=True))
            else:
                accumulate(tail_accumulators, grads[: len(tail_vars)])
            correct = count_correct(labels, logits)
            values = metrics_fn(labels, logits)
            # Each read runs where its variable lives; only a control edge crosses tasks.
            reads = []
            for v in written:
                with tf.device(v.device):
                    reads.append(v.read_value())
            with tf.control_dependencies(reads):
                return (tf.identity(loss), tf.identity(correct),
                        [tf.identity(g) for g in grads[len(tail_vars):]],
                        [tf.identity(v) for v in values])  # fmt: skip

        with tf.compat.v1.device(device_fn):
            loss, correct, boundary_grads, values = critical_section.execute(ps_section)
        head_grads = tape.gradient(boundary, sources, output_gradients=boundary_grads)
        if head_accumulators is None:
            head_optimizer.apply_gradients(zip(head_grads, head_vars, strict=True))
        else:
            accumulate(head_accumulators, head_grads)
        return (loss, correct, *values)

    @tf.function
    def ralp_train_step(iterator):
        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    ralp_train_step.device_function = device_fn
    return ralp_train_step


# ---------------------------------------------------------------------------- BSP rounds


def make_accumulators(variables) -> list[tf.Variable]:
    """One zeroed gradient accumulator per variable, on the variable's own task (so adding a
    gradient sends it to the PS once, as an update would)."""
    accumulators = []
    for v in variables:
        with tf.device(variable_device(v)):
            accumulators.append(tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                                            name="bsp_accumulator"))  # fmt: skip
    return accumulators


def accumulate(accumulators, grads) -> None:
    for acc, grad in zip(accumulators, grads, strict=True):
        acc.assign_add(grad)


def round_update(groups) -> Callable:
    """BSP's one update per round: ``groups`` is a list of (optimizer, variables,
    accumulators); each optimizer (made
    :func:`ralp._compat.update_where_variables_live`) applies the mean of its
    accumulated gradients, then the accumulators are zeroed. Runs where the variables live."""

    @tf.function
    def apply_round(count):
        for optimizer, variables, accumulators in groups:
            grads = []
            for acc in accumulators:
                with tf.device(acc.device):
                    grads.append(acc.read_value() / tf.cast(count, acc.dtype))
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            for acc in accumulators:
                with tf.device(acc.device):
                    acc.assign(tf.zeros_like(acc))

    return apply_round
