"""Per-batch training step functions, one plain PS and one RALP, with the same maths.

Both are ``tf.function``s named ``ralp_train_step`` (the audit finds their graphs by it),
scheduled by ``ClusterCoordinator`` on a worker, called as ``step(iterator, token)``; both
return the batch's mean loss, its number of correct predictions, whether its update was
applied (False when the step was a rerun of one already applied: see :class:`StepLedger`),
and the batch's value of each of the user's metrics (``metrics_fn(labels, predictions)``,
computed where the predictions are): ``(loss, correct, applied, *metrics)``.

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

Exactly once: ``ClusterCoordinator`` reruns a step on another worker when its worker is lost,
and the lost worker may have applied the update before it died (measured: 3 workers, 4 worker
kills in 400 steps counted 402 updates). So every scheduled step carries a unique ``token``,
and each group of updates (plain PS: the model; RALP: the head, and the tail inside the PS
critical section) is applied only if its :class:`StepLedger` on the PS has not seen the token,
then records it. The rerun of an applied step computes, but changes nothing. No write of a
group starts before all its gradients have landed on their variables' tasks: a worker lost
while they cross leaves the group untouched (without that gate each variable's update, and
the optimizer's count, ran as its own gradient arrived, and the rerun applied them again:
61 updates for 60 steps under ASP, in CI). Still open: a PS task's executor stopped between
the group's writes and the token's record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tensorflow as tf

from ralp._compat import variable_device
from ralp.placement.plan import ps_device
from ralp.placement.rewriter import LayerDeviceFunction, PlacedModel, Split
from ralp.ps_strategy.pulls import BatchedPulls


def count_correct(labels, logits):
    labels = tf.reshape(tf.cast(labels, tf.int64), [-1])
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int64)
    return tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float32))


LEDGER_SIZE = 4096  # tokens remembered per ledger: far more than the steps ever in flight


class StepLedger:
    """Which step tokens a group of updates has applied: a ring of ``LEDGER_SIZE`` int64 on
    ``device`` (a PS task). Token ``t`` has been applied iff ``ring[t % size] == t``; steps in
    flight span far fewer tokens than the ring holds, so a rerun always finds its own mark.
    Not checkpointed: tokens only ever grow within a process, and after a restore nothing in
    flight predates it."""

    def __init__(self, device: str, name: str):
        self.device = device
        with tf.device(device):
            self.ring = tf.Variable(tf.fill([LEDGER_SIZE], tf.constant(-1, tf.int64)),
                                    trainable=False, name=f"{name}_step_ledger")

    def guarded(self, token, update: GroupUpdate):
        """Run ``update`` and record ``token``, unless ``token`` is recorded already; returns
        whether it ran. The check and the record run on the ledger's task; the record waits
        for a read of every variable the update writes (each on its own task). Without that
        order a worker killed mid-step could leave the token recorded and the update (or its
        count) not applied: the rerun would then skip a batch (measured: 59 of 60 under ASP).
        """
        token = tf.cast(token, tf.int64)
        with tf.device(self.device):
            slot = tf.math.floormod(token, LEDGER_SIZE)
            fresh = tf.not_equal(tf.gather(self.ring, slot), token)

        def apply():
            landed = update.landed()
            # no write starts before every gradient has landed: a worker lost while its
            # gradients cross then leaves the group untouched, and the rerun applies it once
            with tf.control_dependencies(landed.arrivals()):
                landed.run()
            reads = []
            for v in update.written():
                with tf.device(v.device):
                    reads.append(v.read_value())
            with tf.device(self.device), tf.control_dependencies(reads):
                self.ring.scatter_nd_update([[slot]], [token])
            return tf.constant(True)

        return tf.cond(fresh, apply, lambda: tf.constant(False))

    def reset(self) -> None:
        self.ring.assign(tf.fill([LEDGER_SIZE], tf.constant(-1, tf.int64)))


@dataclass(frozen=True)
class GroupUpdate:
    """One group's update: apply the gradients with the optimizer, or (BSP, ``accumulators``)
    add them to the accumulators; ``written()``: the tf.Variables it writes."""

    optimizer: object
    variables: list
    grads: list
    accumulators: list | None = None

    def run(self) -> None:
        if self.accumulators is None:
            self.optimizer.apply_gradients(zip(self.grads, self.variables, strict=True))
        else:
            accumulate(self.accumulators, self.grads)

    def landed(self) -> GroupUpdate:
        """The same update on a copy of each gradient made on its variable's task (where the
        update reads it: the copy is the one crossing, not a second)."""
        targets = self.accumulators if self.accumulators is not None else self.variables
        grads = []
        for target, grad in zip(targets, self.grads, strict=True):
            with tf.device(variable_device(target)):
                grads.append(_copy(grad))
        return GroupUpdate(self.optimizer, self.variables, grads, self.accumulators)

    def arrivals(self) -> list:
        """The tensors whose being computed means every gradient is there."""
        return [t for g in self.grads if g is not None
                for t in ((g.values, g.indices) if isinstance(g, tf.IndexedSlices) else (g,))]

    def written(self) -> list:
        if self.accumulators is not None:
            return list(self.accumulators)
        # the variables, their slots and the update counter (Keras variables: their tf.Variable)
        return [v.value for v in [*self.variables, *self.optimizer.variables]]


def _copy(grad):
    if grad is None:
        return None
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(tf.identity(grad.values), tf.identity(grad.indices),
                                grad.dense_shape)
    return tf.identity(grad)


def group_update(optimizer, variables, grads, accumulators=None) -> GroupUpdate:
    return GroupUpdate(optimizer, list(variables), list(grads), accumulators)


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


def plain_step(strategy, model, optimizer, loss_fn, ledger: StepLedger, accumulators=None,
               pulls: BatchedPulls | None = None,
               metrics_fn: Callable = _no_metrics) -> Callable:
    """With ``accumulators`` (BSP) the step adds its gradients to them instead of updating;
    with ``pulls`` the variables are pulled in those batches (:mod:`ralp.ps_strategy.pulls`)."""
    variables = model.trainable_variables

    def replica_fn(x, y, token):
        with tf.GradientTape() as tape:
            logits, sources = forward(model, x, pulls, tape)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, sources)
        applied = ledger.guarded(token, group_update(optimizer, variables, grads, accumulators))
        return (loss, count_correct(y, logits), applied, *metrics_fn(y, logits))

    @tf.function
    def ralp_train_step(iterator, token):
        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y, token))

    return ralp_train_step


def ralp_step(
    strategy,
    placed: PlacedModel,
    split: Split,
    head_optimizer,
    tail_optimizer,
    loss_fn,
    critical_section: tf.CriticalSection,
    ledgers: tuple[StepLedger, StepLedger],
    head_accumulators=None,
    tail_accumulators=None,
    pulls: BatchedPulls | None = None,
    metrics_fn: Callable = _no_metrics,
) -> Callable:
    """With accumulators (BSP) the step adds the head's and the tail's gradients to them
    instead of updating: the tail keeps its weights for the whole round, too. ``ledgers``:
    the head's and the tail's (the tail's on the loss task, checked inside the section).
    With ``pulls`` the head's variables are pulled in those batches."""
    head, tail = split.head, split.tail
    head_ledger, tail_ledger = ledgers
    head_vars, tail_vars = head.trainable_variables, tail.trainable_variables
    loss_device = ps_device(placed.loss_task, placed.device_type)
    device_fn = LayerDeviceFunction(placed.plan, loss_device, placed.device_type)
    # Everything the PS section writes; reading them last orders the lock release after it.
    written = [v.value for v in tail.variables] + [v.value for v in tail_optimizer.variables]
    written += list(tail_accumulators or []) + [tail_ledger.ring]

    def replica_fn(x, y, token):
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
            tail_grads = grads[: len(tail_vars)]
            tail_ledger.guarded(token, group_update(tail_optimizer, tail_vars, tail_grads,
                                                    tail_accumulators))
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
                        [tf.identity(v) for v in values])

        with tf.compat.v1.device(device_fn):
            loss, correct, boundary_grads, values = critical_section.execute(ps_section)
        head_grads = tape.gradient(boundary, sources, output_gradients=boundary_grads)
        applied = head_ledger.guarded(token, group_update(head_optimizer, head_vars, head_grads,
                                                          head_accumulators))
        return (loss, correct, applied, *values)

    @tf.function
    def ralp_train_step(iterator, token):
        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y, token))

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
                                            name="bsp_accumulator"))
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
