"""Per-batch training step functions, one plain PS and one RALP, with the same maths.

Both are ``tf.function``s named ``ralp_train_step`` (the audit finds their graphs by it),
scheduled by ``ClusterCoordinator`` on a worker, called as ``step(iterator, token)``; a batch
is ``(x, y)`` or ``(x, y, sample_weight)``. Both return the batch's sums
(:class:`ralp.training.objective.Objective`: its loss sums, samples, its share of the
model's own losses and what it adds to the metrics' state, computed where the predictions
are) and whether its update was applied (False when the step was a rerun of one already
applied: see :class:`StepLedger`): ``(sums, applied)``. They are traced without AutoGraph,
as Keras 3 traces its own train step: their control flow is TensorFlow's ops (``tf.cond``),
and a user's layers, losses and metrics are traced as in Keras' ``fit``.

An asynchronous step is one update of its own: the gradient of its batch's loss
``num / den + reg``. Under BSP (``accumulators``) a step adds the gradient of its ``num`` to
the accumulators and its ``den`` to the round's; the round's update
(:func:`round_update`) applies ``sum(num gradients) / sum(den)`` plus the gradient of the
model's own losses: one Keras step on the round's batches together.

Plain PS: forward, loss, backward and the update's inputs are all computed on the worker;
every variable is read from and every gradient written to the PS tasks.

RALP: the worker runs the head (kept layers) and sends the boundary activations and the labels
to the PS (a model input that an offloaded layer reads crosses with them as it is, and gets no
gradient back). In one critical section on the PS that computes the loss, the PS runs the tail's
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
from ralp.training.data import own, unpack
from ralp.training.objective import Objective, plus, regularization, regularization_gradients

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
            # gradients cross then leaves the group untouched, and the rerun applies it once.
            # One gate on the ledger's task waits for them all, and every op of the update
            # waits for the gate: one control edge each, not one per gradient (a graph of
            # some 10^5 edges for a network of a few hundred variables, which each worker's
            # graph optimizer went through before its first step).
            with tf.device(self.device):
                gate = tf.group(*landed.arrivals())
            with tf.control_dependencies([gate]):
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
    den: tuple | None = None  # BSP: (the round's den accumulator, this batch's den)

    def run(self) -> None:
        if self.accumulators is None:
            self.optimizer.apply_gradients(zip(self.grads, self.variables, strict=True))
        else:
            accumulate(self.accumulators, self.grads)
            if self.den is not None:
                self.den[0].assign_add(self.den[1])

    def landed(self) -> GroupUpdate:
        """The same update on a copy of each gradient made on its variable's task (where the
        update reads it: the copy is the one crossing, not a second)."""
        targets = self.accumulators if self.accumulators is not None else self.variables
        grads = []
        for target, grad in zip(targets, self.grads, strict=True):
            with tf.device(variable_device(target)):
                grads.append(_copy(grad))
        return GroupUpdate(self.optimizer, self.variables, grads, self.accumulators, self.den)

    def arrivals(self) -> list:
        """The tensors whose being computed means every gradient is there."""
        return [t for g in self.grads if g is not None
                for t in ((g.values, g.indices) if isinstance(g, tf.IndexedSlices) else (g,))]

    def written(self) -> list:
        if self.accumulators is not None:
            return list(self.accumulators) + ([self.den[0]] if self.den is not None else [])
        # the variables, their slots and the update counter (Keras variables: their tf.Variable)
        return [v.value for v in [*self.variables, *self.optimizer.variables]]


def _copy(grad):
    if grad is None:
        return None
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(tf.identity(grad.values), tf.identity(grad.indices),
                                grad.dense_shape)
    return tf.identity(grad)


def group_update(optimizer, variables, grads, accumulators=None, den=None) -> GroupUpdate:
    return GroupUpdate(optimizer, list(variables), list(grads), accumulators, den)


def forward(model, x, pulls: BatchedPulls | None, tape: tf.GradientTape):
    """``model(x)`` on the worker; with batched ``pulls``, on the pulled values (watched by
    ``tape``). Returns the outputs, what gradients are taken against, and the model's own
    losses (regularizers) on those values."""
    if pulls is None:
        outputs = model(x, training=True)
        return outputs, model.trainable_variables, regularization(model)
    trainable, non_trainable = pulls.values()
    tape.watch(trainable)
    outputs, state, losses = model.stateless_call(trainable, non_trainable, x, training=True,
                                                  return_losses=True)
    pulls.assign_state(state)
    reg = tf.add_n([tf.reduce_sum(v) for v in losses]) if losses else tf.constant(0.0)
    return outputs, trainable, reg


def plain_step(strategy, model, optimizer, objective: Objective, ledger: StepLedger,
               accumulators=None, pulls: BatchedPulls | None = None,
               workers: int = 1, den_accumulator=None) -> Callable:
    """With ``accumulators`` (BSP, ``workers`` per round) the step adds its gradients to them
    instead of updating; with ``pulls`` the variables are pulled in those batches
    (:mod:`ralp.ps_strategy.pulls`)."""
    variables = model.trainable_variables
    share = 1.0 / workers if accumulators is not None else 1.0

    def replica_fn(batch, token):
        x, y, weights, rows = unpack(batch)
        with tf.GradientTape() as tape:
            predictions, sources, reg = forward(model, x, pulls, tape)
            y, predictions, weights = own(rows, y, predictions, weights)
            num, den = objective.loss_sums(y, predictions, weights, share)
            loss = tf.math.divide_no_nan(num, den) + tf.cast(reg, num.dtype)
        if accumulators is None:
            update = group_update(optimizer, variables, tape.gradient(loss, sources))
        else:
            update = group_update(optimizer, variables, tape.gradient(num, sources),
                                  accumulators, (den_accumulator, den))
        applied = ledger.guarded(token, update)
        states = objective.metric_states(y, predictions, weights)
        return objective.sums(num, den, tf.shape(predictions)[0], reg * share, states), applied

    @tf.function(autograph=False)  # see the module's docstring
    def ralp_train_step(iterator, token):
        return strategy.run(replica_fn, args=(next(iterator), token))

    return ralp_train_step


def ralp_step(
    strategy,
    placed: PlacedModel,
    split: Split,
    head_optimizer,
    tail_optimizer,
    objective: Objective,
    critical_section: tf.CriticalSection,
    ledgers: tuple[StepLedger, StepLedger],
    head_accumulators=None,
    tail_accumulators=None,
    pulls: BatchedPulls | None = None,
    workers: int = 1,
    den_accumulator=None,
) -> Callable:
    """With accumulators (BSP, ``workers`` per round) the step adds the head's and the tail's
    gradients to them instead of updating: the tail keeps its weights for the whole round,
    too. ``ledgers``: the head's and the tail's (the tail's on the loss task, checked inside
    the section). With ``pulls`` the head's variables are pulled in those batches."""
    head, tail = split.head, split.tail
    has_gradient = split.has_gradient()  # a model input crossing as it is has none
    head_ledger, tail_ledger = ledgers
    head_vars, tail_vars = head.trainable_variables, tail.trainable_variables
    loss_device = ps_device(placed.loss_task, placed.device_type)
    device_fn = LayerDeviceFunction(placed.plan, loss_device, placed.device_type)
    synced = tail_accumulators is not None
    share = 1.0 / workers if synced else 1.0
    # Everything the PS section writes; reading them last orders the lock release after it.
    written = [v.value for v in tail.variables] + [v.value for v in tail_optimizer.variables]
    written += list(tail_accumulators or []) + [tail_ledger.ring]
    written += [den_accumulator] if den_accumulator is not None else []

    def replica_fn(batch, token):
        x, y, weights, rows = unpack(batch)
        with tf.GradientTape() as tape:
            boundary, sources, head_reg = forward(head, x, pulls, tape)
        boundary = list(boundary) if isinstance(boundary, list | tuple) else [boundary]

        def ps_section():
            on_ps = [tf.identity(a) for a in boundary]  # one copy of each activation to the PS
            differentiable = [a for a, g in zip(on_ps, has_gradient, strict=True) if g]
            labels = tf.identity(y)
            sample_weight = None if weights is None else tf.identity(weights)
            with tf.GradientTape() as ps_tape:
                ps_tape.watch(differentiable)
                predictions = tail(on_ps if len(on_ps) > 1 else on_ps[0], training=True)
                if isinstance(predictions, list | tuple):
                    predictions = predictions[0]
                labels, predictions, sample_weight = own(rows, labels, predictions, sample_weight)
                num, den = objective.loss_sums(labels, predictions, sample_weight, share)
                tail_reg = tf.cast(regularization(tail), num.dtype)
                # BSP: the gradient of num (the round divides); else the batch's own loss
                loss = num if synced else tf.math.divide_no_nan(num, den) + tail_reg
            grads = ps_tape.gradient(loss, tail_vars + differentiable)
            tail_grads = grads[: len(tail_vars)]
            tail_ledger.guarded(token, group_update(
                tail_optimizer, tail_vars, tail_grads, tail_accumulators,
                (den_accumulator, den) if synced else None))
            states = objective.metric_states(labels, predictions, sample_weight)
            samples = tf.shape(predictions)[0]
            # Each read runs where its variable lives; only a control edge crosses tasks.
            reads = []
            for v in written:
                with tf.device(v.device):
                    reads.append(v.read_value())
            with tf.control_dependencies(reads):
                return ([tf.identity(t) for t in (num, den, tail_reg)], tf.identity(samples),
                        [tf.identity(g) for g in grads[len(tail_vars):]],
                        [tf.identity(v) for v in states])

        with tf.compat.v1.device(device_fn):
            (num, den, tail_reg), samples, boundary_grads, states = critical_section.execute(
                ps_section)
        targets = [a for a, g in zip(boundary, has_gradient, strict=True) if g]
        targets += [] if synced else [head_reg]
        output_grads = boundary_grads + ([] if synced else [tf.ones_like(head_reg)])
        head_grads = tape.gradient(targets, sources, output_gradients=output_grads)
        applied = head_ledger.guarded(token, group_update(head_optimizer, head_vars, head_grads,
                                                          head_accumulators))
        reg = (tf.cast(head_reg, tail_reg.dtype) + tail_reg) * share
        return objective.sums(num, den, samples, reg, states), applied

    @tf.function(autograph=False)  # see the module's docstring
    def ralp_train_step(iterator, token):
        return strategy.run(replica_fn, args=(next(iterator), token))

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


def make_den_accumulator(device: str) -> tf.Variable:
    """The round's ``den`` (what its summed loss is divided by), on ``device`` (a PS task)."""
    with tf.device(device):
        return tf.Variable(0.0, trainable=False, name="bsp_den_accumulator")


def accumulate(accumulators, grads) -> None:
    for acc, grad in zip(accumulators, grads, strict=True):
        acc.assign_add(grad)


def round_update(groups, den_accumulator) -> Callable:
    """BSP's one update per round: ``groups`` is a list of (optimizer, variables,
    accumulators, model); each optimizer (made :func:`ralp._compat.update_where_variables_live`)
    applies its accumulated gradients divided by the round's ``den``, plus the gradient of
    ``model``'s own losses (regularizers) at the round's weights, where the variables live;
    then the accumulators are zeroed."""

    @tf.function(autograph=False)  # see the module's docstring
    def apply_round():
        den = den_accumulator.read_value()
        for optimizer, variables, accumulators, model in groups:
            _, reg_grads = regularization_gradients(model, variables)
            grads = []
            for acc, g in zip(accumulators, reg_grads, strict=True):
                with tf.device(acc.device):
                    grads.append(plus(tf.math.divide_no_nan(acc.read_value(),
                                                            tf.cast(den, acc.dtype)), g))
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            for acc in accumulators:
                with tf.device(acc.device):
                    acc.assign(tf.zeros_like(acc))
        with tf.device(den_accumulator.device):
            den_accumulator.assign(0.0)

    return apply_round
