"""``ralp.wrap(model, cluster)``: train an existing Keras model on a PS cluster, placed.

The same trainer runs plain PS and RALP: the two differ only in the plan (empty for plain PS)
and therefore in the step function. Modes:

- ``"ps"``: plain ``ParameterServerStrategy``, no rewriting;
- ``"ralp"``: offload the layers after the profiler's best split (or the given plan), even
  if the skewness rule would not;
- ``"auto"``: the profiler decides; a model with nothing worth offloading trains on plain PS
  with a warning saying why.

The user's model is never changed: ``wrap`` clones it into the strategy's scope and copies
its weights; :meth:`Trainer.unwrap` gives back a plain Keras model with the trained weights.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from ralp.placement.plan import Plan, PlanError, ps_device
from ralp.placement.rewriter import (
    PlacedModel,
    colocating_creator,
    placed_clone,
    snapshot_state,
    split_model,
)
from ralp.ps_strategy.cluster import ClusterError, ClusterSpec
from ralp.ps_strategy.connect import Connection, connect, describe, unreachable
from ralp.ps_strategy.staleness import SyncPolicy, SyncRecord
from ralp.ps_strategy.steps import (
    atomic_iterations,
    make_accumulators,
    plain_step,
    ps_local,
    ralp_step,
    round_update,
)
from ralp.ps_strategy.sync import SlowWorker, SyncedSteps

MODES = ("auto", "ralp", "ps")
IN_FLIGHT_PER_WORKER = 8  # steps queued ahead per worker while the trainer watches the cluster


class ClusterWarning(UserWarning):
    """Something went wrong in the cluster that training survives (a lost worker)."""


class PlacementWarning(UserWarning):
    """RALP was asked for (mode "auto") but the model trains on plain PS; says why."""


@dataclass
class History:
    """What ``fit`` returns: per-epoch means (``history``) and every step's loss."""

    history: dict[str, list[float]] = field(default_factory=lambda: {"loss": [], "accuracy": []})
    step_losses: list[float] = field(default_factory=list)
    epoch_seconds: list[float] = field(default_factory=list)
    images_per_second: list[float] = field(default_factory=list)
    # When each step was seen finished (time.perf_counter(), 10 ms polling): the bench's
    # per-window throughput and step-time spread come from these.
    step_end_times: list[float] = field(default_factory=list)
    # Under a sync paradigm: which worker ran each step, and each epoch's SyncRecord.
    step_workers: list[int] = field(default_factory=list)
    sync: list[SyncRecord] = field(default_factory=list)


class StalenessHook(keras.callbacks.Callback):
    """Train one ``fit`` under a synchronization paradigm, as a Keras-style callback:
    ``trainer.fit(..., callbacks=[ralp.StalenessHook("dssp", staleness=(3, 15))])``.

    ``sync`` is "bsp", "asp", "ssp" or "dssp" (or "ssp:3", "dssp:3:15"); ``staleness`` is
    SSP's bound s or DSSP's (s_L, s_U). After ``fit``, ``records`` holds each epoch's
    :class:`~ralp.ps_strategy.staleness.SyncRecord` (clocks, waiting, starts and their gaps,
    the controller's choices).
    """

    def __init__(self, sync: str | SyncPolicy = "dssp", staleness=None,
                 slow_worker: str | SlowWorker | None = None):  # fmt: skip
        super().__init__()
        self.policy = as_policy(sync, staleness)
        self.slow_worker = (
            SlowWorker.parse(slow_worker) if isinstance(slow_worker, str) else slow_worker
        )
        self.records: list[SyncRecord] = []


def as_policy(sync, staleness=None) -> SyncPolicy | None:
    """A :class:`SyncPolicy` from a name ("ssp", "dssp:3:15"), a policy, or None."""
    if sync is None:
        if staleness is not None:
            raise ValueError("staleness needs a sync paradigm (sync='ssp' or 'dssp')")
        return None
    if isinstance(sync, SyncPolicy):
        return sync
    return SyncPolicy.parse(sync, staleness)


def optimizer_factory(template) -> Callable[[], keras.optimizers.Optimizer]:
    """A maker of fresh optimizers like ``template`` (an instance, a name such as "adam", or
    None for SGD with momentum). Reads the template's config now: an optimizer made before
    the process connected to a cluster cannot be read afterwards."""
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
    raise TypeError(
        f"optimizer must be a keras optimizer or its name, got {type(template).__name__}"
    )


def _check_model(model) -> None:
    from ralp.profiler.layer_table import ProfileError
    from ralp.profiler.layer_table import _check_model as check

    try:
        check(model, f"model {getattr(model, 'name', model)!r}")
    except ProfileError as e:
        raise PlanError(str(e)) from None


class Trainer:
    """A Keras model placed on a PS cluster, with a Keras-like ``fit``.

    Build it with :func:`wrap`. ``trainer.model`` is the placed clone; ``trainer.plan`` says
    what runs where; ``trainer.step`` is the traced per-batch step (the audit reads it).
    """

    def __init__(
        self,
        model: keras.Model,
        connection: Connection,
        plan: Plan,
        *,
        mode: str,
        optimizer=None,
        loss=None,
        device_type: str = "cpu",
        step_timeout: float = 120.0,
        state: list | None = None,
        sync: SyncPolicy | None = None,
        slow_worker: SlowWorker | None = None,
    ):
        self.original = model
        self.sync = sync
        self.slow_worker = slow_worker
        self.connection = connection
        self.plan = plan
        self.mode = mode
        self.device_type = device_type.upper()
        self.step_timeout = step_timeout
        self.loss_fn = loss or keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        make_optimizer = optimizer_factory(optimizer)
        strategy = connection.strategy
        self.placed: PlacedModel = placed_clone(model, plan, strategy, self.device_type, state)
        self.model = self.placed.model
        if plan.is_empty:
            with strategy.scope():
                self.optimizers = {"optimizer": atomic_iterations(make_optimizer())}
                self.optimizers["optimizer"].build(self.model.trainable_variables)
            self.split = None
            self.step = plain_step(strategy, self.model, self.optimizers["optimizer"], self.loss_fn)
        else:
            self.split = split_model(self.placed)
            loss_task = self.placed.loss_task
            with strategy.scope():
                head_opt = atomic_iterations(make_optimizer())
                head_opt.build(self.split.head.trainable_variables)
                # The tail optimizer's own variables (iteration, learning rate; made in its
                # constructor) go to the loss task, where its update runs. Its slots are made
                # in build(), outside that creator: Keras colocates each with its variable.
                with tf.variable_creator_scope(colocating_creator(self.placed.anchors[loss_task])):
                    tail_opt = ps_local(make_optimizer())
                tail_opt.build(self.split.tail.trainable_variables)
            self.optimizers = {"head": head_opt, "tail": tail_opt}
            with tf.device(ps_device(loss_task, self.device_type)):
                self.critical_section = tf.CriticalSection(name="ralp_ps_section")
            self.step = ralp_step(strategy, self.placed, self.split, head_opt, tail_opt,
                                  self.loss_fn, self.critical_section)  # fmt: skip
        # Keras tracks weights, not layer state such as Dropout's seed generators: add those.
        weights = {id(w) for w in self.model.weights}
        layer_state = [v.value for v in self.model.variables if id(v) not in weights]
        self._checkpoint = tf.train.Checkpoint(model=self.model, layer_state=layer_state,
                                               **self.optimizers)  # fmt: skip
        self._iterators: dict[int, Any] = {}
        self._worker_iterators: dict[int, Any] = {}
        self._lost_workers: list[tuple[str, int, str]] = []
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
            self._bsp_step = plain_step(strategy, self.model, opt, self.loss_fn, accs)
            # The round's update runs in the coordinator, outside strategy.run: update each
            # variable on its own task (ps_local), not through the replica all-reduce path.
            self._apply_round = round_update([(ps_local(opt), variables, accs)])
        else:
            head_vars = self.split.head.trainable_variables
            tail_vars = self.split.tail.trainable_variables
            head_accs, tail_accs = make_accumulators(head_vars), make_accumulators(tail_vars)
            head_opt, tail_opt = self.optimizers["head"], self.optimizers["tail"]
            self._bsp_step = ralp_step(strategy, self.placed, self.split, head_opt, tail_opt,
                                       self.loss_fn, self.critical_section, head_accs,
                                       tail_accs)  # fmt: skip
            self._apply_round = round_update([(ps_local(head_opt), head_vars, head_accs),
                                              (tail_opt, tail_vars, tail_accs)])  # fmt: skip

    # ------------------------------------------------------------------ data

    def _iterator(self, dataset_fn: Callable[[], tf.data.Dataset]):
        key = id(dataset_fn)
        if key not in self._iterators:
            per_worker = self.connection.coordinator.create_per_worker_dataset(dataset_fn)
            # The entry keeps dataset_fn alive, so its id cannot be reused by another function.
            self._iterators[key] = (dataset_fn, iter(per_worker))
        return self._iterators[key][1]

    @staticmethod
    def numpy_dataset_fn(x, y, batch_size: int, shuffle: bool = True, seed: int | None = None):
        """A per-worker dataset function over in-memory arrays: repeated, batched, shuffled."""
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y):
            raise ValueError(f"x and y differ in length: {len(x)} vs {len(y)}")
        if len(x) < batch_size:
            raise ValueError(f"{len(x)} samples are fewer than one batch of {batch_size}")

        def dataset_fn(_context=None):
            ds = tf.data.Dataset.from_tensor_slices((x, y))
            if shuffle:
                ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
            return ds.repeat().batch(batch_size, drop_remainder=True).prefetch(2)

        return dataset_fn

    # ------------------------------------------------------------------ training

    def fit(
        self,
        x=None,
        y=None,
        *,
        batch_size: int = 32,
        epochs: int = 1,
        steps_per_epoch: int | None = None,
        dataset_fn: Callable[[], tf.data.Dataset] | None = None,
        callbacks: Sequence[keras.callbacks.Callback] = (),
        shuffle: bool = True,
        seed: int | None = None,
        verbose: int = 1,
    ) -> History:
        """Train for ``epochs`` x ``steps_per_epoch`` batches (a batch runs on one worker).

        Data: arrays ``x``, ``y`` (default ``steps_per_epoch`` = one pass over them), or a
        ``dataset_fn`` returning an endless ``tf.data.Dataset`` of ``(images, labels)`` batches,
        called on every worker. Callbacks get Keras' train, epoch and train-batch-end hooks
        (batch hooks in the order steps were scheduled; ``logs`` is None there, since a
        step's loss is fetched only at the end of the epoch).
        """
        if dataset_fn is None:
            if x is None or y is None:
                raise ValueError("fit needs x and y arrays, or a dataset_fn")
            dataset_fn = self.numpy_dataset_fn(x, y, batch_size, shuffle, seed)
            steps_per_epoch = steps_per_epoch or max(1, len(x) // batch_size)
        elif steps_per_epoch is None:
            raise ValueError("with a dataset_fn, give steps_per_epoch")
        sync, slow_worker = self.sync, self.slow_worker
        hooks = [cb for cb in callbacks if isinstance(cb, StalenessHook)]
        if len(hooks) > 1:
            raise ValueError("give at most one StalenessHook per fit")
        if hooks:
            sync, slow_worker = hooks[0].policy, hooks[0].slow_worker or slow_worker
        if sync is not None and sync.paradigm == "bsp":
            self._build_bsp()
        iterator = None if sync is not None else self._iterator(dataset_fn)
        history = History()
        for cb in callbacks:
            cb.set_model(self.model)
        self.model.stop_training = False
        _call(callbacks, "on_train_begin")
        for epoch in range(epochs):
            _call(callbacks, "on_epoch_begin", epoch)
            start = time.perf_counter()
            label = f"epoch {epoch + 1}/{epochs}"
            if sync is None:
                results, end_times = self._run_steps(
                    iterator, steps_per_epoch, verbose, label, callbacks
                )
            else:
                epoch_run = self._run_synced(dataset_fn, steps_per_epoch, sync, slow_worker,
                                             verbose, label, callbacks)  # fmt: skip
                results, end_times = epoch_run.results, epoch_run.end_times
                history.step_workers += epoch_run.workers
                history.sync.append(epoch_run.record)
                for hook in hooks:
                    hook.records.append(epoch_run.record)
            seconds = time.perf_counter() - start
            losses = [float(loss) for loss, _ in results]
            correct = sum(float(c) for _, c in results)
            logs = {
                "loss": float(np.mean(losses)),
                "accuracy": correct / (len(results) * batch_size),
            }
            history.step_losses += losses
            history.step_end_times += end_times
            history.history["loss"].append(logs["loss"])
            history.history["accuracy"].append(logs["accuracy"])
            history.epoch_seconds.append(seconds)
            history.images_per_second.append(len(results) * batch_size / seconds)
            _call(callbacks, "on_epoch_end", epoch, logs)
            if self.model.stop_training:
                break
        _call(callbacks, "on_train_end", {k: v[-1] for k, v in history.history.items() if v})
        return history

    def _run_steps(
        self, iterator, steps: int, verbose: int, label: str, callbacks: Sequence = ()
    ) -> tuple[list[tuple], list[float]]:
        """Schedule ``steps`` batches and wait for them; fail clearly if the cluster cannot go on.

        At most ``IN_FLIGHT_PER_WORKER`` steps per worker are queued ahead, so the trainer keeps
        watching the cluster instead of blocking in ``schedule`` (whose queue is bounded).
        ClusterCoordinator reruns a lost worker's steps on another worker, but with no worker
        left it waits for one to come back (up to an hour), and a hung task blocks it forever.
        So while waiting the trainer probes every task: a lost PS or the loss of every worker
        is an error at once, a lost worker among others a warning; and no finished step for
        ``step_timeout`` seconds is an error too.
        """
        from tqdm import tqdm

        coordinator = self.connection.coordinator
        window = IN_FLIGHT_PER_WORKER * self.connection.num_workers
        remotes: list = []
        end_times: list[float] = []
        done, last_progress, last_probe = 0, time.monotonic(), 0.0
        bar = tqdm(total=steps, desc=label, unit="batch", disable=not verbose, leave=True)
        try:
            while True:
                while len(remotes) < steps and len(remotes) - done < window:
                    remotes.append(coordinator.schedule(self.step, args=(iterator,)))
                while done < len(remotes) and _is_ready(remotes[done]):
                    done += 1
                    end_times.append(time.perf_counter())
                    bar.update(1)
                    _call(callbacks, "on_train_batch_end", done - 1, None)
                    last_progress = time.monotonic()
                if done == steps:
                    break
                now = time.monotonic()
                if now - last_probe > 1.0:
                    last_probe = now
                    self._check_tasks(unreachable(self.connection.spec))
                if now - last_progress > self.step_timeout:
                    raise ClusterError(
                        f"no training step finished for {self.step_timeout:.0f} s: a task of the "
                        "cluster is hung or far too slow (see Trainer step_timeout)"
                    )
                time.sleep(0.01)
            coordinator.join()  # raises the first step error, if any
        except tf.errors.UnavailableError as e:
            raise ClusterError(f"a task of the cluster became unreachable: {e.message}") from None
        finally:
            bar.close()
        return [tuple(np.asarray(v) for v in r.fetch()) for r in remotes], end_times

    def _worker_iterator_list(self, dataset_fn) -> list:
        """Each worker's own input iterator, made on that worker (its shard of the data)."""
        key = id(dataset_fn)
        if key not in self._worker_iterators:
            W = self.connection.num_workers
            iterators = []
            for w in range(W):
                with tf.device(f"/job:worker/replica:0/task:{w}/device:CPU:0"):
                    context = tf.distribute.InputContext(W, w, W)
                    iterators.append(iter(dataset_fn(context)))
            self._worker_iterators[key] = (dataset_fn, iterators)
        return self._worker_iterators[key][1]

    def _run_synced(self, dataset_fn, steps, sync, slow_worker, verbose, label, callbacks):
        from tqdm import tqdm

        # First: its checks (a slow worker that does not exist) fail before anything is made.
        runner = SyncedSteps(
            sync,
            self.connection.num_workers,
            self._bsp_step if sync.paradigm == "bsp" else self.step,
            lambda w: f"/job:worker/replica:0/task:{w}",
            apply_round=self._apply_round,
            slow_worker=slow_worker,
            check_cluster=lambda: self._check_tasks(
                unreachable(self.connection.spec), synchronous=True
            ),  # fmt: skip
            step_timeout=self.step_timeout,
        )
        iterators = self._worker_iterator_list(dataset_fn)
        bar = tqdm(total=steps, desc=f"{label} {sync}", unit="batch", disable=not verbose,
                   leave=True)  # fmt: skip
        count = [0]

        def on_step(worker: int) -> None:
            count[0] += 1
            bar.update(1)
            _call(callbacks, "on_train_batch_end", count[0] - 1, None)

        try:
            return runner.run(iterators, steps, on_step)
        except tf.errors.UnavailableError as e:
            raise ClusterError(f"a task of the cluster became unreachable: {e.message}") from None
        finally:
            bar.close()

    def _check_tasks(self, lost: list[tuple[str, int, str]], synchronous: bool = False) -> None:
        lost_ps = [t for t in lost if t[0] == "ps"]
        lost_workers = [t for t in lost if t[0] == "worker"]
        if lost_ps:
            raise ClusterError(f"parameter server lost during training: {describe(lost_ps)}; "
                               "its variables are gone with it (restore from a checkpoint)")  # fmt: skip
        if lost_workers and len(lost_workers) == self.connection.num_workers:
            raise ClusterError(f"every worker was lost during training: {describe(lost_workers)}; "
                               "the variables on the PS are intact: save a checkpoint or restart "
                               "the workers")  # fmt: skip
        if lost_workers and synchronous:
            raise ClusterError(f"worker lost during synchronized training: {describe(lost_workers)};"
                               " a bounded paradigm cannot go on without it (restart it, or "
                               "train with sync=None / 'asp')")  # fmt: skip
        new = [t for t in lost_workers if t not in self._lost_workers]
        if new:
            self._lost_workers += new
            warnings.warn(f"worker lost during training: {describe(new)}; its steps are rerun on "
                          "the remaining workers", ClusterWarning, stacklevel=3)  # fmt: skip

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
        """A plain Keras model (the user's architecture) holding the trained weights."""
        plain = keras.models.clone_model(self.original)
        plain.set_weights(self.model.get_weights())
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
        return f"<ralp.Trainer mode={self.mode!r} workers={self.connection.num_workers} ps={self.connection.num_ps}>\n{self.plan}"


def _is_ready(remote) -> bool:
    # RemoteValue has no public status query; a fetched-or-failed value has its status set.
    status = getattr(remote, "_status", None)
    if status is None and hasattr(remote, "_values_remote_value"):
        status = getattr(remote._values_remote_value, "_status", None)
    return status is not None and getattr(status, "name", "") in ("READY", "ABORTED")


def _call(callbacks, hook: str, *args) -> None:
    for cb in callbacks:
        getattr(cb, hook)(*args)


def choose_plan(model: keras.Model, mode: str, num_ps: int, *, plan: Plan | None = None,
                batch_size: int = 32, threshold: float | None = None) -> tuple[Plan, str | None]:  # fmt: skip
    """The plan for ``mode``, and a warning text when "auto" falls back to plain PS."""
    from ralp.profiler.api import profile
    from ralp.profiler.defaults import DEFAULT_THRESHOLD

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    k = DEFAULT_THRESHOLD if threshold is None else threshold
    p = profile(model, batch_size, threshold=k, ps=num_ps)
    names = tuple(r.name for r in p.table.rows)
    if mode == "ps":
        return Plan(model.name, num_ps, names, {}, None, "manual", "mode 'ps': plain PS"), None
    if plan is not None:
        plan.check_model(names)
        if plan.num_ps > num_ps:
            raise PlanError(f"the plan uses {plan.num_ps} PS tasks but the cluster has {num_ps}")
        return plan, None
    if mode == "ralp" and p.split.index is not None:  # forced: the best split, whatever S says
        moved = names[p.split.index + 1 :]
        sizes = {r.name: r.param_bytes for r in p.table.rows}
        forced = Plan.offloading(names, moved, num_ps, param_bytes=sizes)
        return Plan(model.name, num_ps, names, forced.offloaded, p.candidate_split_after,
                    "profiler", p.verdict), None  # fmt: skip
    auto = Plan.from_profile(p, num_ps)
    if auto.is_empty:
        return auto, f"ralp: {model.name!r} trains on plain PS: {p.verdict}"
    return auto, None


def wrap(
    model: keras.Model,
    cluster: ClusterSpec,
    *,
    mode: str = "auto",
    plan: Plan | None = None,
    optimizer=None,
    loss=None,
    batch_size: int = 32,
    threshold: float | None = None,
    device_type: str = "cpu",
    connect_timeout: float = 10.0,
    step_timeout: float = 120.0,
    sync: str | SyncPolicy | None = None,
    staleness=None,
    slow_worker: str | SlowWorker | None = None,
) -> Trainer:
    """Place ``model`` on ``cluster`` and return a :class:`Trainer` with ``fit``.

    ``sync`` picks the synchronization paradigm (:mod:`ralp.ps_strategy.sync`): None (the
    default) is ParameterServerStrategy's own asynchronous scheduling; "bsp", "asp", "ssp"
    (``staleness=s``) and "dssp" (``staleness=(s_L, s_U)``) run one driver per worker with
    the bound enforced. ``slow_worker="INDEX:FACTOR"`` (or ``"INDEX:+SECONDS"``, a fixed delay per
    step) slows one worker down (heterogeneity).

    Run this in the coordinator (chief) process, once per process: ParameterServerStrategy
    connects the whole process to the cluster. Wrapping a ``Trainer`` again with the same
    settings returns it unchanged; with other settings it re-places its current weights.
    """
    if isinstance(model, Trainer):
        if model.connection.spec == cluster and mode == model.mode and plan in (None, model.plan):
            return model
        model = model.unwrap()
    _check_model(model)
    policy = as_policy(sync, staleness)
    if isinstance(slow_worker, str):
        slow_worker = SlowWorker.parse(slow_worker)
    if device_type not in ("cpu", "gpu"):
        raise ValueError(f"device_type must be 'cpu' or 'gpu', got {device_type!r}")
    # Variables made before PSS connects this process are unreadable afterwards: read first.
    state = snapshot_state(model)
    optimizer = optimizer_factory(optimizer)
    connection = connect(cluster, timeout=connect_timeout)
    chosen, warning = choose_plan(model, mode, connection.num_ps, plan=plan, batch_size=batch_size,
                                  threshold=threshold)  # fmt: skip
    if warning:
        warnings.warn(warning, PlacementWarning, stacklevel=2)
    resolved = "ps" if chosen.is_empty else "ralp"
    return Trainer(model, connection, chosen, mode=resolved, optimizer=optimizer, loss=loss,
                   device_type=device_type, step_timeout=step_timeout, state=state,
                   sync=policy, slow_worker=slow_worker)  # fmt: skip
