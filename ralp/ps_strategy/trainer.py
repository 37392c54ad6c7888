"""``ralp.wrap(model, cluster)``: train an existing Keras model on a PS cluster, placed.

The same trainer runs plain PS and RALP: the two differ only in the plan (empty for plain PS;
:mod:`ralp.placement.choose` makes it from the mode) and therefore in the step function
(:mod:`ralp.ps_strategy.steps`). An epoch's steps run under ParameterServerStrategy's own
asynchronous schedule (:class:`~ralp.ps_strategy.loops.AsyncSteps`) or under a
synchronization paradigm (:class:`~ralp.ps_strategy.sync.SyncedSteps`).

The user's model is never changed: ``wrap`` clones it into the strategy's scope and copies
its weights; :meth:`Trainer.unwrap` gives back a plain Keras model with the trained weights.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from ralp._compat import colocating_creator, count_updates_atomically, update_where_variables_live
from ralp.cluster.spec import ClusterError, ClusterSpec
from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_THRESHOLD
from ralp.models.training import BatchMetrics, default_loss, optimizer_factory, training_setup
from ralp.placement.choose import check_placeable, choose_plan
from ralp.placement.plan import Plan, ps_device
from ralp.placement.pull_schedule import SCHEDULES as PULL_SCHEDULES
from ralp.placement.rewriter import (
    PlacedModel,
    clone_uncompiled,
    placed_clone,
    snapshot_state,
    split_model,
)
from ralp.profiler.api import Profile
from ralp.ps_strategy.callbacks import History, StalenessHook, call_callbacks
from ralp.ps_strategy.connect import Connection, connect
from ralp.ps_strategy.data import DatasetFn, WorkerInputs, numpy_dataset_fn, worker_device
from ralp.ps_strategy.health import ClusterWatch
from ralp.ps_strategy.loops import AsyncSteps, EpochRun
from ralp.ps_strategy.pull_profile import choose_pulls, layer_forward_times
from ralp.ps_strategy.pulls import batched_pulls
from ralp.ps_strategy.staleness import SyncPolicy, as_policy
from ralp.ps_strategy.steps import make_accumulators, plain_step, ralp_step, round_update
from ralp.ps_strategy.sync import SlowWorker, SyncedSteps


class PlacementWarning(UserWarning):
    """RALP was asked for (mode "skewness") but the model trains on plain PS; says why."""


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
        self.connection = connection
        self.plan = plan
        self.profile = profile
        self.mode = mode
        # Set by ralp.wrap(mode="auto"): the planner's choice and why (ralp.planner.auto).
        self.auto = None
        self.device_type = device_type.upper()
        self.step_timeout = step_timeout
        self.loss_fn = loss or default_loss(model)
        self.metrics = metrics or BatchMetrics(())
        make_optimizer = optimizer_factory(optimizer)
        strategy = connection.strategy
        self.placed: PlacedModel = placed_clone(model, plan, strategy, self.device_type, state)
        self.model = self.placed.model
        self.split = None if plan.is_empty else split_model(self.placed)
        self.pulls, self.pull_choice = None, None
        if pull_schedule != "default":  # the variables of the workers' layers, in batches
            worker_model = self.model if self.split is None else self.split.head
            self.pull_choice = choose_pulls(pull_schedule, worker_model, profile.table,
                                            forward_times, connection)  # fmt: skip
            self.plan = plan = plan.with_pulls(pull_schedule, self.pull_choice.layer_batches)
            self.pulls = batched_pulls(worker_model, plan.pull_batches)
        if plan.is_empty:
            with strategy.scope():
                self.optimizers = {"optimizer": count_updates_atomically(make_optimizer())}
                self.optimizers["optimizer"].build(self.model.trainable_variables)
            self.step = plain_step(strategy, self.model, self.optimizers["optimizer"], self.loss_fn,
                                   pulls=self.pulls, metrics_fn=self.metrics)  # fmt: skip
        else:
            loss_task = self.placed.loss_task
            with strategy.scope():
                head_opt = count_updates_atomically(make_optimizer())
                head_opt.build(self.split.head.trainable_variables)
                # The tail optimizer's own variables (iteration, learning rate; made in its
                # constructor) go to the loss task, where its update runs. Its slots are made
                # in build(), outside that creator: Keras colocates each with its variable.
                with tf.variable_creator_scope(colocating_creator(self.placed.anchors[loss_task])):
                    tail_opt = update_where_variables_live(make_optimizer())
                tail_opt.build(self.split.tail.trainable_variables)
            self.optimizers = {"head": head_opt, "tail": tail_opt}
            with tf.device(ps_device(loss_task, self.device_type)):
                self.critical_section = tf.CriticalSection(name="ralp_ps_section")
            self.step = ralp_step(strategy, self.placed, self.split, head_opt, tail_opt,
                                  self.loss_fn, self.critical_section, pulls=self.pulls,
                                  metrics_fn=self.metrics)  # fmt: skip
        # Keras tracks weights, not layer state such as Dropout's seed generators: add those.
        weights = {id(w) for w in self.model.weights}
        layer_state = [v.value for v in self.model.variables if id(v) not in weights]
        self._checkpoint = tf.train.Checkpoint(model=self.model, layer_state=layer_state,
                                               **self.optimizers)  # fmt: skip
        self.inputs = connection.keep(WorkerInputs(connection.coordinator, connection.num_workers))
        self.watch = ClusterWatch(connection.spec)
        self._bsp_step = self._apply_round = None
        if sync is not None and sync.paradigm == "bsp":
            self._build_bsp()

    def _build_bsp(self) -> None:
        """BSP's step (gradients into accumulators on the PS) and its once-per-round update."""
        if self._bsp_step is not None:
            return
        strategy = self.connection.strategy
        if self.split is None:
            variables = self.model.trainable_variables
            accs = make_accumulators(variables)
            opt = self.optimizers["optimizer"]
            self._bsp_step = plain_step(strategy, self.model, opt, self.loss_fn, accs, self.pulls,
                                        metrics_fn=self.metrics)  # fmt: skip
            # The round's update runs in the coordinator, outside strategy.run: update each
            # variable on its own task, not through the replica all-reduce path.
            self._apply_round = round_update([(update_where_variables_live(opt), variables, accs)])
        else:
            head_vars = self.split.head.trainable_variables
            tail_vars = self.split.tail.trainable_variables
            head_accs, tail_accs = make_accumulators(head_vars), make_accumulators(tail_vars)
            head_opt, tail_opt = self.optimizers["head"], self.optimizers["tail"]
            self._bsp_step = ralp_step(strategy, self.placed, self.split, head_opt, tail_opt,
                                       self.loss_fn, self.critical_section, head_accs,
                                       tail_accs, self.pulls, metrics_fn=self.metrics)  # fmt: skip
            self._apply_round = round_update([
                (update_where_variables_live(head_opt), head_vars, head_accs),
                (tail_opt, tail_vars, tail_accs),
            ])  # fmt: skip

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
        callbacks: Sequence[keras.callbacks.Callback] = (),
        shuffle: bool = True,
        seed: int | None = None,
        verbose: int = 1,
    ) -> History:
        """Train for ``epochs`` x ``steps_per_epoch`` batches (a batch runs on one worker).

        Data: arrays ``x``, ``y`` (default ``steps_per_epoch`` = one pass over them), or a
        ``dataset_fn`` returning an endless ``tf.data.Dataset`` of ``(images, labels)`` batches,
        called on every worker. Callbacks get Keras' train, epoch and train-batch-end hooks
        (batch hooks in the order steps finished; ``logs`` is None there, since a step's
        loss is fetched only at the end of the epoch).
        """
        if dataset_fn is None:
            if x is None or y is None:
                raise ValueError("fit needs x and y arrays, or a dataset_fn")
            dataset_fn = numpy_dataset_fn(x, y, batch_size, shuffle, seed)
            steps_per_epoch = steps_per_epoch or max(1, len(x) // batch_size)
        elif steps_per_epoch is None:
            raise ValueError("with a dataset_fn, give steps_per_epoch")
        sync, slow_worker = self.sync, self.slow_worker
        hooks = [cb for cb in callbacks if isinstance(cb, StalenessHook)]
        if len(hooks) > 1:
            raise ValueError("give at most one StalenessHook per fit")
        if hooks:
            sync, slow_worker = hooks[0].policy, hooks[0].slow_worker or slow_worker
        # First: its checks (a slow worker that does not exist) fail before anything is made.
        runner = self._steps_runner(sync, slow_worker)
        inputs = self.inputs.shared(dataset_fn) if sync is None else self.inputs.per_worker(dataset_fn)
        history = History()
        for cb in callbacks:
            cb.set_model(self.model)
        self.model.stop_training = False
        call_callbacks(callbacks, "on_train_begin")
        for epoch in range(epochs):
            call_callbacks(callbacks, "on_epoch_begin", epoch)
            start = time.perf_counter()
            label = f"epoch {epoch + 1}/{epochs}" + (f" {sync}" if sync is not None else "")
            epoch_run = self._run_epoch(runner, inputs, steps_per_epoch, label, verbose, callbacks)
            seconds = time.perf_counter() - start
            if epoch_run.record is not None:
                history.step_workers += epoch_run.workers
                history.sync.append(epoch_run.record)
                for hook in hooks:
                    hook.records.append(epoch_run.record)
            losses = [float(result[0]) for result in epoch_run.results]
            correct = sum(float(result[1]) for result in epoch_run.results)
            logs = {
                "loss": float(np.mean(losses)),
                "accuracy": correct / (len(epoch_run.results) * batch_size),
            }
            for k, metric in enumerate(self.metrics.metrics):  # the mean of per-batch values
                logs[metric.name] = float(np.mean([r[2 + k] for r in epoch_run.results]))
            history.step_losses += losses
            history.step_end_times += epoch_run.end_times
            for name, value in logs.items():
                history.history.setdefault(name, []).append(value)
            history.epoch_seconds.append(seconds)
            history.images_per_second.append(len(epoch_run.results) * batch_size / seconds)
            call_callbacks(callbacks, "on_epoch_end", epoch, logs)
            if self.model.stop_training:
                break
        call_callbacks(callbacks, "on_train_end",
                       {k: v[-1] for k, v in history.history.items() if v})  # fmt: skip
        return history

    def _steps_runner(self, sync: SyncPolicy | None, slow_worker: SlowWorker | None):
        """The loop that runs an epoch's steps: the coordinator's own schedule, or drivers
        holding each worker to ``sync``'s bound."""
        if sync is None:
            return AsyncSteps(self.connection.coordinator, self.step, self.connection.num_workers,
                              self.watch.check, self.step_timeout)  # fmt: skip
        if sync.paradigm == "bsp":
            self._build_bsp()
        return SyncedSteps(
            sync,
            self.connection.num_workers,
            self._bsp_step if sync.paradigm == "bsp" else self.step,
            worker_device,
            apply_round=self._apply_round,
            slow_worker=slow_worker,
            check_cluster=lambda: self.watch.check(synchronous=True),
            step_timeout=self.step_timeout,
        )

    def _run_epoch(self, runner, inputs, steps: int, label: str, verbose: int,
                   callbacks: Sequence) -> EpochRun:  # fmt: skip
        from tqdm import tqdm

        bar = tqdm(total=steps, desc=label, unit="batch", disable=not verbose, leave=True)
        done = [0]

        def on_step() -> None:
            done[0] += 1
            bar.update(1)
            call_callbacks(callbacks, "on_train_batch_end", done[0] - 1, None)

        try:
            return runner.run(inputs, steps, on_step)
        except tf.errors.UnavailableError as e:
            raise ClusterError(f"a task of the cluster became unreachable: {e.message}") from None
        finally:
            bar.close()

    # ------------------------------------------------------------------ state

    def save_checkpoint(self, path: str) -> str:
        """Save every variable -- on workers' PS shards and offloaded on the PS -- and the
        optimizers' state; returns the checkpoint's path prefix."""
        return self._checkpoint.write(path)

    def restore_checkpoint(self, path: str) -> None:
        self._checkpoint.read(path).assert_consumed()

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
        """Loss and accuracy of the current weights, computed on the coordinator."""
        plain = self.unwrap()
        logits = plain.predict(np.asarray(x), batch_size=batch_size, verbose=0)
        loss = float(self.loss_fn(np.asarray(y), logits))
        return {
            "loss": loss,
            "accuracy": float(np.mean(np.argmax(logits, -1) == np.asarray(y).reshape(-1))),
        }

    def __repr__(self) -> str:
        return (f"<ralp.Trainer mode={self.mode!r} workers={self.connection.num_workers} "
                f"ps={self.connection.num_ps}>\n{self.plan}")  # fmt: skip


def wrap(
    model: keras.Model,
    cluster: ClusterSpec,
    *,
    mode: str = "skewness",
    plan: Plan | None = None,
    optimizer=None,
    loss=None,
    metrics=None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threshold: float = DEFAULT_THRESHOLD,
    device_type: str = "cpu",
    connect_timeout: float = 10.0,
    step_timeout: float = 120.0,
    sync: str | SyncPolicy | None = None,
    staleness=None,
    slow_worker: str | SlowWorker | None = None,
    pull_schedule: str = "default",
) -> Trainer:
    """Place ``model`` on ``cluster`` and return a :class:`Trainer` with ``fit``.

    ``mode``: "ps" (plain ParameterServerStrategy), "ralp" (offload the layers after the
    profiler's split, or ``plan``), or "skewness" (the paper's rule decides; a model with
    nothing worth offloading trains on plain PS with a :class:`PlacementWarning` saying why).
    "auto" (the planner's predicted-throughput choice) is resolved by the public
    ``ralp.wrap`` (:func:`ralp.planner.auto.wrap`) before it calls this.

    ``optimizer``, ``loss`` and ``metrics`` default to the model's own when it was compiled
    (``model.compile(...)``), else to SGD with momentum, sparse categorical cross-entropy on
    the model's logits (or its softmax probabilities) and no extra metrics
    (:mod:`ralp.models.training`). Labels are integer class ids. A model with several
    outputs is refused.

    ``sync`` picks the synchronization paradigm (:mod:`ralp.ps_strategy.sync`): None (the
    default) is ParameterServerStrategy's own asynchronous scheduling; "bsp", "asp", "ssp"
    (``staleness=s``) and "dssp" (``staleness=(s_L, s_U)``) run one driver per worker with
    the bound enforced. ``slow_worker="INDEX:FACTOR"`` (or ``"INDEX:+SECONDS"``, a fixed delay per
    step) slows one worker down (heterogeneity).

    ``pull_schedule`` says how workers pull the variables of the layers they run
    (:mod:`ralp.placement.pull_schedule`): "default" (ParameterServerStrategy's own: every
    variable a receive of its own, all at once), "layer" (one message per layer, one after
    the other) or "ibatch" (iBatch's greedy batches, from per-layer forward times measured
    here before connecting and the pull cost measured on the cluster). ``trainer.plan``
    shows the batches.

    Run this in the coordinator (chief) process, once per process: ParameterServerStrategy
    connects the whole process to the cluster. Wrapping a ``Trainer`` again with the same
    settings returns it unchanged; with other settings it re-places its current weights.
    """
    if isinstance(model, Trainer):
        if model.connection.spec == cluster and mode == model.mode and plan in (None, model.plan):
            return model
        model = model.unwrap()
    check_placeable(model)
    setup = training_setup(model, optimizer, loss, metrics, where="ralp.wrap")
    policy = as_policy(sync, staleness)
    if isinstance(slow_worker, str):
        slow_worker = SlowWorker.parse(slow_worker)
    if device_type not in ("cpu", "gpu"):
        raise ValueError(f"device_type must be 'cpu' or 'gpu', got {device_type!r}")
    if pull_schedule not in PULL_SCHEDULES:
        raise ValueError(f"pull_schedule must be one of {', '.join(PULL_SCHEDULES)}, "
                         f"got {pull_schedule!r}")  # fmt: skip
    # Variables made before PSS connects this process are unreadable afterwards: read first.
    state = snapshot_state(model)
    forward_times = layer_forward_times(model, batch_size) if pull_schedule == "ibatch" else None
    compile_config = model.get_compile_config() if getattr(model, "compiled", False) else None
    optimizer = optimizer_factory(setup.optimizer)
    batch_metrics = BatchMetrics(setup.metrics)
    connection = connect(cluster, timeout=connect_timeout)
    choice = choose_plan(model, mode, workers=connection.num_workers, num_ps=connection.num_ps,
                         plan=plan, batch_size=batch_size, threshold=threshold)  # fmt: skip
    if choice.warning:
        warnings.warn(choice.warning, PlacementWarning, stacklevel=2)
    resolved = "ps" if choice.plan.is_empty else "ralp"
    return Trainer(model, connection, choice.plan, mode=resolved, profile=choice.profile,
                   optimizer=optimizer, loss=setup.loss, metrics=batch_metrics,
                   device_type=device_type,
                   step_timeout=step_timeout, state=state, sync=policy,
                   slow_worker=slow_worker, pull_schedule=pull_schedule,
                   forward_times=forward_times, compile_config=compile_config)  # fmt: skip
