"""The parameter-server modes' runtime (plain PS and RALP), in the coordinator (chief) process.

``ralp.wrap`` makes it with a connection to the cluster and a plan; the one trainer
(:mod:`ralp.training.trainer`) and fit loop (:mod:`ralp.training.fit_loop`) drive it. Plain
PS and RALP differ only in the plan (empty for plain PS) and so in the step function
(:mod:`ralp.ps_strategy.steps`). An epoch's updates run under ParameterServerStrategy's own
asynchronous schedule (:class:`~ralp.ps_strategy.loops.AsyncSteps`: each update is one
worker's step) or under a synchronization paradigm
(:class:`~ralp.ps_strategy.sync.SyncedSteps`; under BSP one update is a round: a step of
every worker, their gradients applied once).

The user's model is never changed: the runtime clones it into the strategy's scope
(:func:`ralp.placement.rewriter.placed_clone`) with its weights. Every worker reads its own
share of the data (:mod:`ralp.training.data`), through an iterator made on that worker and
made again by the coordinator if the worker restarts.
"""

from __future__ import annotations

import itertools

import numpy as np
import tensorflow as tf

from ralp._compat import (
    colocating_creator,
    count_updates_atomically,
    update_where_variables_live,
    variable_device,
)
from ralp._compat.coordinator import current_worker_index
from ralp.cluster.probe import describe, unreachable, wait_until_reachable
from ralp.cluster.spec import ClusterError
from ralp.placement.plan import Plan, ps_device
from ralp.placement.rewriter import PlacedModel, placed_clone, split_model
from ralp.ps_strategy.connect import Connection, reconnect
from ralp.ps_strategy.health import ClusterWatch, TaskLost, failed_ps_tasks, is_ps_failure
from ralp.ps_strategy.loops import AsyncSteps, WarmUp
from ralp.ps_strategy.pull_profile import choose_pulls
from ralp.ps_strategy.pulls import batched_pulls
from ralp.ps_strategy.staleness import SyncPolicy
from ralp.ps_strategy.steps import (
    StepLedger,
    make_accumulators,
    make_den_accumulator,
    plain_step,
    ralp_step,
    round_update,
)
from ralp.ps_strategy.sync import SyncedSteps
from ralp.training.data import Sharding
from ralp.training.optimizer_state import OptimizerState

PROBE_AFTER_ERROR_S = 1.0  # a killed task's port refuses at once; a restarted one is back


def worker_device(index: int) -> str:
    return f"/job:worker/replica:0/task:{index}"


def check_one_replica(strategy) -> None:
    """Refuse workers that each hold several devices: the steps train one replica per worker
    (its variables read and updated once per step), and several would each need their share
    of the batch and their gradients summed first."""
    if strategy.num_replicas_in_sync > 1:
        raise ClusterError(
            f"each worker of this cluster has {strategy.num_replicas_in_sync} devices; ralp "
            "trains one replica per worker task: run one worker task per GPU "
            "(CUDA_VISIBLE_DEVICES=<its GPU>)")


class PSRuntime:
    """Plain PS or RALP on a connected cluster (the module's docstring)."""

    is_chief = True
    size = 1  # processes that run the fit: the coordinator alone

    def __init__(self, model, connection: Connection, plan: Plan, *, profile, make_optimizer,
                 state: list, device_type: str = "cpu", sync: SyncPolicy | None = None,
                 step_timeout: float = 120.0, restart_timeout: float = 300.0,
                 pulls: str = "default", forward_times: dict | None = None,
                 optimizer_state: OptimizerState | None = None):
        self.original, self.plan, self.profile = model, plan, profile
        self._initial_optimizer = optimizer_state  # the wrapped model's, read before connecting
        self.sync, self.slow_worker = sync, None  # slow_worker: a benchmark's heterogeneity
        self.device_type = device_type.upper()
        self.step_timeout, self.restart_timeout = step_timeout, restart_timeout
        self._make_optimizer, self._state = make_optimizer, state
        self.total_steps = 0
        self._tokens = itertools.count()  # one per scheduled step, never reused in a process
        self.pull_schedule, self.forward_times, self.pull_choice = pulls, forward_times, None
        self.connection: Connection | None = None
        self._place(connection)

    mode = property(lambda self: "ps" if self.plan.is_empty else "ralp")
    workers = property(lambda self: self.connection.num_workers)

    @property
    def synchronous_workers(self) -> int:
        """Workers one update's batch is split over: all of them under BSP, else one."""
        return self.workers if self.bsp else 1

    @property
    def bsp(self) -> bool:
        return self.sync is not None and self.sync.paradigm == "bsp"

    step_function = property(lambda self: self._bsp[0] if self.bsp else self.step)  # audits

    def describe(self) -> str:
        return f"workers={self.workers} ps={self.connection.num_ps}\n{self.plan}"

    # ------------------------------------------------------------------ placing

    def _place(self, connection: Connection) -> None:
        """Place the model on ``connection``'s cluster with fresh optimizers: at first, and
        again after a task restarted (a new connection; the old objects stay with it, so
        that none is deleted through the new one)."""
        if self.connection is not None:
            self.connection.keep(self.__dict__.copy())
        self.connection = connection
        strategy, plan = connection.strategy, self.plan
        check_one_replica(strategy)
        self.placed: PlacedModel = placed_clone(self.original, plan, strategy, self.device_type,
                                                self._state)
        self.model = self.placed.model
        self.split = None if plan.is_empty else split_model(self.placed)
        self.pulls = None
        if self.pull_schedule != "default":  # the variables of the workers' layers, in batches
            worker_model = self.model if self.split is None else self.split.head
            if self.pull_choice is None:  # chosen once: after a reconnection, the same batches
                self.pull_choice = choose_pulls(self.pull_schedule, worker_model,
                                                self.profile.table, self.forward_times, connection)
                self.plan = plan = plan.with_pulls(self.pull_schedule,
                                                   self.pull_choice.layer_batches)
            self.pulls = batched_pulls(worker_model, plan.pull_batches)
        self._make_optimizers()
        if self._initial_optimizer is not None:
            self._assign_optimizers(self._initial_optimizer)
        # Keras tracks weights, not layer state such as Dropout's seed generators: add those.
        weights = {id(w) for w in self.model.weights}
        layer_state = [v.value for v in self.model.variables if id(v) not in weights]
        self.checkpoint = tf.train.Checkpoint(model=self.model, layer_state=layer_state,
                                              **self.optimizers)
        _ = self.checkpoint.save_counter  # made now, on the coordinator: in every checkpoint
        self.watch = ClusterWatch(connection.spec)
        self.objective = self.step = self._bsp = None
        self._inputs = None

    def _make_optimizers(self) -> None:
        strategy, make = self.connection.strategy, self._make_optimizer
        if self.split is None:
            with strategy.scope():
                optimizer = self._guardable(make())
                optimizer.build(self.model.trainable_variables)
            self.optimizers = {"optimizer": optimizer}
            self.ledgers = (self._ledger(optimizer, "model"),)
            return
        loss_task = self.placed.loss_task
        with strategy.scope():
            head = self._guardable(make())
            head.build(self.split.head.trainable_variables)
            # The tail optimizer's own variables (iteration, learning rate; made in its
            # constructor) go to the loss task, where its update runs. Its slots are made in
            # build(), outside that creator: Keras colocates each with its variable.
            with tf.variable_creator_scope(colocating_creator(self.placed.anchors[loss_task])):
                tail = update_where_variables_live(make())
            tail.build(self.split.tail.trainable_variables)
        self.optimizers = {"head": head, "tail": tail}
        self.ledgers = (self._ledger(head, "head"), self._ledger(tail, "tail"))
        with tf.device(ps_device(loss_task, self.device_type)):
            self.critical_section = tf.CriticalSection(name="ralp_ps_section")

    @staticmethod
    def _guardable(optimizer):
        """An optimizer whose update can run under a step ledger's ``tf.cond``: Keras' own
        all-reduces and updates through ``merge_call``, which a cond branch cannot hold
        (with one replica per worker the all-reduce is the identity), and counts its
        updates atomically."""
        return count_updates_atomically(update_where_variables_live(optimizer))

    @staticmethod
    def _ledger(optimizer, name: str) -> StepLedger:
        return StepLedger(variable_device(optimizer.iterations), name)

    def _build_steps(self, objective) -> None:
        """The traced steps for ``objective`` (the loss and metrics for the labels)."""
        strategy = self.connection.strategy
        if self.split is None:
            opt = self.optimizers["optimizer"]
            self.step = plain_step(strategy, self.model, opt, objective, self.ledgers[0],
                                   pulls=self.pulls)
        else:
            self.step = ralp_step(strategy, self.placed, self.split, self.optimizers["head"],
                                  self.optimizers["tail"], objective, self.critical_section,
                                  self.ledgers, pulls=self.pulls)
        self._bsp = self._build_bsp(objective) if self.bsp else None
        self.objective = objective
        self.warm_up = WarmUp(self.workers)  # new functions: every worker's first step again

    def _build_bsp(self, objective) -> tuple:
        """BSP's step (gradients into accumulators on the PS) and its once-per-round update."""
        strategy, W = self.connection.strategy, self.workers
        den_task = self.placed.loss_task or 0
        den = make_den_accumulator(ps_device(den_task, self.device_type))
        if self.split is None:
            opt = self.optimizers["optimizer"]
            variables = self.model.trainable_variables
            accs = make_accumulators(variables)
            step = plain_step(strategy, self.model, opt, objective, self.ledgers[0], accs,
                              self.pulls, workers=W, den_accumulator=den)
            # The round's update runs in the coordinator, outside strategy.run: each variable
            # is updated on its own task (the optimizer is made so, see _guardable).
            return step, round_update([(opt, variables, accs, self.model)], den)
        head_vars = self.split.head.trainable_variables
        tail_vars = self.split.tail.trainable_variables
        head_accs, tail_accs = make_accumulators(head_vars), make_accumulators(tail_vars)
        head_opt, tail_opt = self.optimizers["head"], self.optimizers["tail"]
        step = ralp_step(strategy, self.placed, self.split, head_opt, tail_opt, objective,
                         self.critical_section, self.ledgers, head_accs, tail_accs, self.pulls,
                         workers=W, den_accumulator=den)
        return step, round_update([(head_opt, head_vars, head_accs, self.split.head),
                                   (tail_opt, tail_vars, tail_accs, self.split.tail)], den)

    # ------------------------------------------------------------------ the fit loop's calls

    def sharding(self, data) -> Sharding:
        return Sharding(self.workers, synchronous=self.bsp)

    def check_data(self, data) -> None:
        pass

    def shared_seed(self, seed: int | None) -> int:
        return int(np.random.default_rng().integers(2**31)) if seed is None else int(seed)

    def agree(self, flag: bool) -> bool:
        return bool(flag)

    def barrier(self) -> None:
        """Nothing to wait for: the coordinator is the only process that runs the fit."""

    def share_text(self, text: str) -> str:
        return text  # one process

    def reduce(self, rows: np.ndarray) -> np.ndarray:
        return rows  # every update's sums are here already

    def begin(self, objective, data, sharding: Sharding, seed: int, position) -> None:
        """Give each worker its data from ``position`` and trace the steps for it."""
        if objective is not self.objective:
            self._build_steps(objective)
        W = self.workers
        if hasattr(data, "serialize"):  # a dataset travels to the workers as its graph
            data.serialize()
        if self.sync is None:
            # ParameterServerStrategy's own schedule: one dataset function on every worker,
            # which asks where it runs; each worker skips its share of the steps done
            skip = position.done // W
            indices = [tf.constant(w, tf.int64) for w in range(W)]  # see current_worker_index

            def dataset_fn():
                worker = current_worker_index(indices)
                return data.worker_dataset(sharding, worker, seed=seed, skip=skip, remote=True)

            per_worker = self.connection.coordinator.create_per_worker_dataset(dataset_fn)
            self._inputs = self.connection.keep(iter(per_worker))
        else:
            skips = [position.done] * W if sharding.synchronous else position.worker_batches
            self._inputs = []
            for w in range(W):
                with tf.device(f"{worker_device(w)}/device:CPU:0"):
                    self._inputs.append(iter(data.worker_dataset(
                        sharding, w, seed=seed, skip=skips[w], remote=True)))
        self._position = position
        self._runner().trace(self._inputs)  # now: a worker hung once training began hangs a step

    def run(self, updates: int, *, on_begin, on_update, history) -> bool:
        """Run ``updates`` updates; ``on_update(sums)`` after each (True: stop). Returns
        whether it was stopped. A lost task the fit can go on after is a :class:`TaskLost`."""
        runner = self._runner()
        W = self.workers if self.bsp else 1
        pending: list[np.ndarray] = []
        stopped = [False]

        def on_step(fetch) -> bool:
            sums, applied = fetch()
            history.duplicate_steps += 0 if bool(np.asarray(applied)) else 1
            pending.append(np.asarray(sums, np.float64))
            if len(pending) < W:
                return False
            total = np.sum(pending, axis=0)
            pending.clear()
            self.total_steps += 1
            on_begin(0)
            stopped[0] = bool(on_update(total))
            return stopped[0]

        base = self._position.done
        self.watch.steps_done = lambda: base + len(history.step_end_times)
        try:
            with self.watch.coordinator_reports():
                run = runner.run(self._inputs, updates * W, on_step)
        except tf.errors.OpError as e:
            raise self._judge(e, runner) from None
        finally:
            self._note_worker_failures(history)
        if run.record is not None:
            history.step_workers += run.workers
            history.sync.append(run.record)
            for w in run.workers:
                self._position.worker_batches[w] += 1
        return stopped[0]

    def _runner(self):
        """The loop that runs an epoch's steps: the coordinator's own schedule, or drivers
        holding each worker to the paradigm's bound."""
        if self.sync is None:
            return AsyncSteps(self.connection.coordinator, self.step, self.workers,
                              self.watch.check, self.step_timeout, lambda: next(self._tokens),
                              self.warm_up)
        step, apply_round = self._bsp if self.bsp else (self.step, None)
        return SyncedSteps(
            self.sync, self.workers, step, worker_device, apply_round=apply_round,
            slow_worker=self.slow_worker,
            check_cluster=lambda: self.watch.check(synchronous=self.sync.paradigm != "asp"),
            step_timeout=self.step_timeout, next_token=lambda: next(self._tokens),
            lost_workers=lambda: {i for job, i, _ in unreachable(self.connection.spec)
                                  if job == "worker"}, warm_up=self.warm_up)

    def _judge(self, error, runner) -> BaseException:
        """A step's error as the fit should see it: a lost PS (or a worker under a bounded
        paradigm) is a :class:`TaskLost`, an unreachable task a :class:`ClusterError`."""
        import time

        check = getattr(runner, "check_cluster", None)
        deadline = time.monotonic() + PROBE_AFTER_ERROR_S
        try:
            while check is not None:  # the step's error can come before the watch's probe
                check()
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        except TaskLost as lost:
            return lost
        report = self.watch.ps_failure_report
        if is_ps_failure(error) or (report and isinstance(error, tf.errors.OutOfRangeError)):
            cause = error if is_ps_failure(error) else report
            return TaskLost(f"a parameter server failed or was restarted "
                            f"({str(cause).splitlines()[0]}); its variables are gone with it. "
                            "Give fit a checkpoint_dir to go on from the last checkpoint once "
                            "it is restarted", failed_ps_tasks(cause, self.connection.spec))
        if isinstance(error, tf.errors.UnavailableError):
            return ClusterError(f"a task of the cluster became unreachable: {error.message}")
        return error

    def _note_worker_failures(self, history) -> None:
        """Workers the probes saw lost (their steps rerun by the others) into the history."""
        from ralp.training.checkpoints import Failure

        seen = {(f.task, f.detected_at) for f in history.failures}
        for event in self.watch.events:
            if (event.task, event.lost_at) not in seen:
                history.failures.append(Failure(
                    task=event.task, kind="worker", at_step=event.at_step,
                    detected_at=event.lost_at, message="lost; its steps rerun by the others"))

    # ------------------------------------------------------------------ failures

    def recoverable(self, error: BaseException) -> bool:
        return isinstance(error, TaskLost)

    def finish(self) -> None:
        pass

    def steps_seen(self) -> int:
        return self.watch.steps_done()

    def recover(self, error: TaskLost, timeout: float) -> None:
        """Wait for the lost tasks, connect again and place the model anew (its initial
        values: the fit restores a checkpoint next)."""
        missing = wait_until_reachable(self.connection.spec, timeout)
        if missing:
            raise ClusterError(f"{error}. The lost tasks did not come back within "
                               f"{timeout:.0f} s: {describe(missing)} (restart them, or raise "
                               "restart_timeout)") from None
        self._place(reconnect(self.connection.spec))

    # ------------------------------------------------------------------ state

    def checkpoint_store(self, directory, every: int | None):
        from ralp.ps_strategy.checkpoint_store import PSCheckpoints

        return PSCheckpoints(self, directory, every)

    def save_checkpoint(self, path: str) -> str:
        return self.checkpoint.write(path)

    def restore_checkpoint(self, path: str) -> None:
        from ralp.training.checkpoints import read_checkpoint

        read_checkpoint(self.checkpoint, path)

    def weights(self) -> list[np.ndarray]:
        return [np.asarray(w) for w in self.model.get_weights()]

    def optimizer_template(self, template):
        return self._make_optimizer

    def _parts(self) -> list[tuple]:
        """(optimizer, its variables, their indices in the model's trainable variables)."""
        index = {id(v): k for k, v in enumerate(self.model.trainable_variables)}
        parts = [(self.optimizers["optimizer"], self.model.trainable_variables)] \
            if self.split is None else [(self.optimizers["head"], self.split.head),
                                        (self.optimizers["tail"], self.split.tail)]
        return [(opt, list(getattr(part, "trainable_variables", part)),
                 [index[id(v)] for v in getattr(part, "trainable_variables", part)])
                for opt, part in parts]

    def optimizer_state(self) -> OptimizerState:
        """The optimizers' state (RALP's head and tail together), keyed by the model's
        trainable variables."""
        state = None
        for optimizer, variables, indices in self._parts():
            part = OptimizerState.read(optimizer, variables, indices,
                                       lambda v: np.asarray(_backing(v).read_value()))
            state = part if state is None else state.merged(part)
        return state

    def _assign_optimizers(self, state: OptimizerState) -> None:
        for optimizer, variables, indices in self._parts():
            state.assign(optimizer, variables, indices)

    def set_state(self, weights: list | None, optimizer: OptimizerState | None) -> None:
        """Set the model's weights (``get_weights()`` order) and the optimizers' state."""
        if weights is not None:
            self.model.set_weights(weights)
        if optimizer is not None:
            self._assign_optimizers(optimizer)

    def set_learning_rate(self, value: float) -> None:
        """Every optimizer's learning rate (RALP's head and tail alike)."""
        for optimizer in self.optimizers.values():
            optimizer.learning_rate = value

    def sync_statistics(self) -> None:
        """Nothing to do: the model's one copy lives on the PS tasks."""


def _backing(variable):
    """The TensorFlow variable behind a Keras 3 variable."""
    return getattr(variable, "value", variable)
