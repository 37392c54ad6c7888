"""The trainer ``ralp.wrap(model, cluster)`` returns (:mod:`ralp.ps_strategy.wrap`): an existing
Keras model trained on a PS cluster, placed.

The same trainer runs plain PS and RALP: the two differ only in the plan (empty for plain PS;
:mod:`ralp.placement.choose` makes it from the mode) and therefore in the step function
(:mod:`ralp.ps_strategy.steps`). An epoch's steps run under ParameterServerStrategy's own
asynchronous schedule (:class:`~ralp.ps_strategy.loops.AsyncSteps`) or under a
synchronization paradigm (:class:`~ralp.ps_strategy.sync.SyncedSteps`).

The user's model is never changed: ``wrap`` clones it into the strategy's scope and copies
its weights; :meth:`Trainer.unwrap` gives back a plain Keras model with the trained weights.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from ralp._compat import (
    colocating_creator,
    count_updates_atomically,
    update_where_variables_live,
    variable_device,
)
from ralp.cluster.probe import unreachable
from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_RESTART_TIMEOUT_S
from ralp.placement.plan import Plan, ps_device
from ralp.placement.rewriter import (
    PlacedModel,
    clone_uncompiled,
    placed_clone,
    split_model,
)
from ralp.profiler.api import Profile
from ralp.ps_strategy.callbacks import History
from ralp.ps_strategy.connect import Connection, reconnect
from ralp.ps_strategy.data import DatasetFn, WorkerInputs, numpy_dataset_fn, worker_device
from ralp.ps_strategy.fitting import run_fit
from ralp.ps_strategy.health import ClusterWatch
from ralp.ps_strategy.loops import AsyncSteps
from ralp.ps_strategy.pull_profile import choose_pulls
from ralp.ps_strategy.pulls import batched_pulls
from ralp.ps_strategy.staleness import SyncPolicy
from ralp.ps_strategy.steps import (
    StepLedger,
    make_accumulators,
    plain_step,
    ralp_step,
    round_update,
)
from ralp.ps_strategy.sync import SlowWorker, SyncedSteps
from ralp.training.checkpoints import read_checkpoint
from ralp.training.compile import (
    BatchMetrics,
    default_loss,
    evaluate_model,
    optimizer_factory,
)


class Trainer:
    """A Keras model placed on a PS cluster, with a Keras-like ``fit``.

    Build it with :func:`wrap`. ``trainer.model`` is the placed clone; ``trainer.plan`` says
    what runs where; ``trainer.profile`` is the profiler's view of the model on this cluster;
    ``trainer.step`` is the traced per-batch step (the audit reads it).
    """

    def __init__(
        self,
        model: keras.Model,
        connection: Connection,
        plan: Plan,
        *,
        mode: str,
        profile: Profile | None = None,
        optimizer=None,
        loss=None,
        metrics: BatchMetrics | None = None,
        device_type: str = "cpu",
        step_timeout: float = 120.0,
        state: list | None = None,
        sync: SyncPolicy | None = None,
        slow_worker: SlowWorker | None = None,
        pull_schedule: str = "default",
        forward_times: dict[str, float] | None = None,
        compile_config: dict | None = None,
    ):
        self.original = model
        # read before connecting (it reads the optimizer's variables): unwrap() compiles with it
        self.compile_config = compile_config
        self.sync = sync
        self.slow_worker = slow_worker
        self.plan = plan
        self.profile = profile
        self.mode = mode
        # Set by ralp.wrap(mode="auto"): the planner's choice and why (ralp.planner.auto).
        self.auto = None
        self.device_type = device_type.upper()
        self.step_timeout = step_timeout
        self.connection: Connection | None = None
        self.loss_fn = loss or default_loss(model)
        self.metrics = metrics or BatchMetrics(())
        make_optimizer = optimizer_factory(optimizer)
        self._make_optimizer = make_optimizer
        self._state = state  # the user's model's values, to place it again after a PS loss
        self.total_steps = 0  # steps trained over every fit (a restored checkpoint's count)
        self._tokens = itertools.count()  # one per scheduled step, never reused in a process
        self.pull_schedule, self.forward_times, self.pull_choice = pull_schedule, forward_times, None
        self._place(connection)

    def _place(self, connection: Connection) -> None:
        """Place the model on ``connection``'s cluster, with fresh optimizers and steps: at
        first, and again after a PS restart (a new connection; the old objects are kept
        with the old one, so that none is deleted through the new connection)."""
        if getattr(self, "connection", None) is not None:
            self.connection.keep(self.__dict__.copy())
        self.connection = connection
        strategy = connection.strategy
        make_optimizer, plan = self._make_optimizer, self.plan
        self.placed: PlacedModel = placed_clone(self.original, plan, strategy, self.device_type,
                                                self._state)
        self.model = self.placed.model
        self.split = None if plan.is_empty else split_model(self.placed)
        self.pulls = None
        if self.pull_schedule != "default":  # the variables of the workers' layers, in batches
            worker_model = self.model if self.split is None else self.split.head
            if self.pull_choice is None:  # chosen once: after a reconnection, the same batches
                self.pull_choice = choose_pulls(self.pull_schedule, worker_model, self.profile.table,
                                                self.forward_times, connection)
                self.plan = plan = plan.with_pulls(self.pull_schedule,
                                                   self.pull_choice.layer_batches)
            self.pulls = batched_pulls(worker_model, plan.pull_batches)
        if plan.is_empty:
            with strategy.scope():
                self.optimizers = {"optimizer": self._guardable(make_optimizer())}
                self.optimizers["optimizer"].build(self.model.trainable_variables)
            self.ledgers = (self._ledger(self.optimizers["optimizer"], "model"),)
            self.step = plain_step(strategy, self.model, self.optimizers["optimizer"], self.loss_fn,
                                   self.ledgers[0], pulls=self.pulls,
                                   metrics_fn=self.metrics)
        else:
            loss_task = self.placed.loss_task
            with strategy.scope():
                head_opt = self._guardable(make_optimizer())
                head_opt.build(self.split.head.trainable_variables)
                # The tail optimizer's own variables (iteration, learning rate; made in its
                # constructor) go to the loss task, where its update runs. Its slots are made
                # in build(), outside that creator: Keras colocates each with its variable.
                with tf.variable_creator_scope(colocating_creator(self.placed.anchors[loss_task])):
                    tail_opt = update_where_variables_live(make_optimizer())
                tail_opt.build(self.split.tail.trainable_variables)
            self.optimizers = {"head": head_opt, "tail": tail_opt}
            self.ledgers = (self._ledger(head_opt, "head"), self._ledger(tail_opt, "tail"))
            with tf.device(ps_device(loss_task, self.device_type)):
                self.critical_section = tf.CriticalSection(name="ralp_ps_section")
            self.step = ralp_step(strategy, self.placed, self.split, head_opt, tail_opt,
                                  self.loss_fn, self.critical_section, self.ledgers,
                                  pulls=self.pulls, metrics_fn=self.metrics)
        # Keras tracks weights, not layer state such as Dropout's seed generators: add those.
        weights = {id(w) for w in self.model.weights}
        layer_state = [v.value for v in self.model.variables if id(v) not in weights]
        self._checkpoint = tf.train.Checkpoint(model=self.model, layer_state=layer_state,
                                               **self.optimizers)
        # Made now (on the coordinator), so that every checkpoint holds it: the ones fit's
        # CheckpointManager writes and the ones save_checkpoint writes read back alike.
        _ = self._checkpoint.save_counter
        self.inputs = connection.keep(WorkerInputs(connection.coordinator, connection.num_workers))
        self.watch = ClusterWatch(connection.spec)
        self._bsp_step = self._apply_round = None
        if self.sync is not None and self.sync.paradigm == "bsp":
            self._build_bsp()

    @staticmethod
    def _guardable(optimizer):
        """An optimizer whose update can run under a step ledger's ``tf.cond``: Keras' own
        all-reduces and updates through ``merge_call``, which a cond branch cannot hold
        (with one replica per worker the all-reduce is the identity), and counts its
        updates atomically."""
        return count_updates_atomically(update_where_variables_live(optimizer))

    @staticmethod
    def _ledger(optimizer, name: str) -> StepLedger:
        """A group's step ledger, on the task of its optimizer's update counter."""
        return StepLedger(variable_device(optimizer.iterations), name)

    def next_token(self) -> int:
        return next(self._tokens)

    def reconnect(self, timeout: float = 10.0) -> None:
        """Connect again to this trainer's cluster (after a task restarted) and place the
        model there anew, with its initial values: restore a checkpoint next."""
        self._place(reconnect(self.connection.spec, timeout=timeout))

    def _build_bsp(self) -> None:
        """BSP's step (gradients into accumulators on the PS) and its once-per-round update."""
        if self._bsp_step is not None:
            return
        strategy = self.connection.strategy
        if self.split is None:
            variables = self.model.trainable_variables
            accs = make_accumulators(variables)
            opt = self.optimizers["optimizer"]
            self._bsp_step = plain_step(strategy, self.model, opt, self.loss_fn, self.ledgers[0],
                                        accs, self.pulls, metrics_fn=self.metrics)
            # The round's update runs in the coordinator, outside strategy.run: each variable
            # is updated on its own task (the optimizer is made so, see _guardable).
            self._apply_round = round_update([(opt, variables, accs)])
        else:
            head_vars = self.split.head.trainable_variables
            tail_vars = self.split.tail.trainable_variables
            head_accs, tail_accs = make_accumulators(head_vars), make_accumulators(tail_vars)
            head_opt, tail_opt = self.optimizers["head"], self.optimizers["tail"]
            self._bsp_step = ralp_step(strategy, self.placed, self.split, head_opt, tail_opt,
                                       self.loss_fn, self.critical_section, self.ledgers,
                                       head_accs, tail_accs, self.pulls,
                                       metrics_fn=self.metrics)
            self._apply_round = round_update([
                (head_opt, head_vars, head_accs),
                (tail_opt, tail_vars, tail_accs),
            ])

    numpy_dataset_fn = staticmethod(numpy_dataset_fn)

    # ------------------------------------------------------------------ training

    def fit(
        self,
        x=None,
        y=None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        epochs: int = 1,
        steps_per_epoch: int | None = None,
        dataset_fn: DatasetFn | None = None,
        validation_data=None,
        validation_split: float = 0.0,
        validation_freq: int | Sequence[int] = 1,
        initial_epoch: int = 0,
        callbacks: Sequence[keras.callbacks.Callback] = (),
        shuffle: bool = True,
        seed: int | None = None,
        verbose: int = 1,
        checkpoint_dir: str | os.PathLike | None = None,
        checkpoint_every: int | None = None,
        restart_timeout: float = DEFAULT_RESTART_TIMEOUT_S,
    ) -> History:
        """Train for epochs ``initial_epoch`` .. ``epochs`` - 1 of ``steps_per_epoch`` batches
        each (a batch runs on one worker), as Keras' ``fit`` does.

        Data: arrays ``x``, ``y`` (default ``steps_per_epoch`` = one pass over them), or a
        ``dataset_fn`` returning an endless ``tf.data.Dataset`` of ``(images, labels)`` batches,
        called on every worker. ``validation_data`` (``(x_val, y_val)`` or a finite dataset
        of batches) or ``validation_split`` (the last share of ``x``, before shuffling) is
        evaluated on the coordinator after the epochs ``validation_freq`` names, into
        ``val_*`` logs and ``History.history``. Callbacks get Keras' hooks with Keras' logs:
        ``on_train_batch_end(batch, {"loss": ...})`` as steps finish, ``on_epoch_end(epoch,
        logs)`` with the epoch's loss, accuracy, metrics and ``val_*``; ``model.stop_training``
        ends the fit (``keras.callbacks.EarlyStopping``).

        Failures (:mod:`ralp.ps_strategy.fitting`): with ``checkpoint_dir``, every variable
        (wherever it lives), the optimizers, the step count and the data position are saved
        there every ``checkpoint_every`` steps and at each epoch's end; a fit interrupted
        earlier goes on from its last checkpoint; and a lost PS (or, under a bounded
        synchronization paradigm, a lost worker) is waited for, up to ``restart_timeout``
        seconds, after which training goes on from the last checkpoint. ``History.failures``
        lists each failure with the steps done again and the time lost.
        """
        return run_fit(self, x, y, batch_size=batch_size, epochs=epochs,
                       steps_per_epoch=steps_per_epoch, dataset_fn=dataset_fn,
                       validation_data=validation_data, validation_split=validation_split,
                       validation_freq=validation_freq, initial_epoch=initial_epoch,
                       callbacks=callbacks, shuffle=shuffle, seed=seed, verbose=verbose,
                       checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                       restart_timeout=restart_timeout)

    def _steps_runner(self, sync: SyncPolicy | None, slow_worker: SlowWorker | None):
        """The loop that runs an epoch's steps: the coordinator's own schedule, or drivers
        holding each worker to ``sync``'s bound. Made again after a reconnection."""
        if sync is None:
            return AsyncSteps(self.connection.coordinator, self.step, self.connection.num_workers,
                              self.watch.check, self.step_timeout, self.next_token)
        if sync.paradigm == "bsp":
            self._build_bsp()
        return SyncedSteps(
            sync,
            self.connection.num_workers,
            self._bsp_step if sync.paradigm == "bsp" else self.step,
            worker_device,
            apply_round=self._apply_round,
            slow_worker=slow_worker,
            check_cluster=lambda: self.watch.check(synchronous=sync.paradigm != "asp"),
            step_timeout=self.step_timeout,
            next_token=self.next_token,
            lost_workers=self._lost_workers,
        )

    def _lost_workers(self) -> set[int]:
        return {i for job, i, _ in unreachable(self.connection.spec) if job == "worker"}

    # ------------------------------------------------------------------ state

    def save_checkpoint(self, path: str) -> str:
        """Save every variable -- on workers' PS shards and offloaded on the PS -- and the
        optimizers' state; returns the checkpoint's path prefix. (``fit(checkpoint_dir=...)``
        saves by itself, with the training position.)"""
        return self._checkpoint.write(path)

    def restore_checkpoint(self, path: str) -> None:
        """Restore a checkpoint of :meth:`save_checkpoint` (or one ``fit`` wrote); a checkpoint
        of another model is a :class:`~ralp.training.checkpoints.CheckpointError`."""
        read_checkpoint(self._checkpoint, path)

    def get_weights(self) -> list[np.ndarray]:
        return self.model.get_weights()

    def unwrap(self) -> keras.Model:
        """A plain Keras model (the user's architecture) holding the trained weights, compiled
        as the user's model was (if it was)."""
        plain = clone_uncompiled(self.original)
        plain.set_weights(self.model.get_weights())
        if self.compile_config:
            plain.compile_from_config(self.compile_config)
        return plain

    def evaluate(self, x, y, batch_size: int = 256) -> dict[str, float]:
        """Loss, accuracy and the metrics of the current weights, on the coordinator."""
        return evaluate_model(self.unwrap(), self.loss_fn, self.metrics, x, y, batch_size)

    def __repr__(self) -> str:
        return (f"<ralp.Trainer mode={self.mode!r} workers={self.connection.num_workers} "
                f"ps={self.connection.num_ps}>\n{self.plan}")

