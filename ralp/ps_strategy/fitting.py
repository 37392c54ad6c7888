"""The loop behind ``Trainer.fit``: epochs of steps, checkpoints, and recovery from lost tasks.

Without a checkpoint directory an epoch's steps run in one go (the coordinator's schedule or
the synchronized drivers), and a lost PS is an error. With ``checkpoint_dir`` the loop:

- resumes from the newest checkpoint there, if a fit was interrupted (a coordinator that died
  and was started again: Keras' BackupAndRestore, for PS training);
- runs the steps in pieces of ``checkpoint_every`` and saves after each piece, and at each
  epoch's end, when every step of the piece is done (no step half-applied);
- when a task it cannot go on without is lost (:class:`~ralp.ps_strategy.health.TaskLost`,
  or a step failing from a restarted PS), waits up to ``restart_timeout`` seconds for every
  task to serve again (the launcher or a supervisor such as Kubernetes restarts it),
  reconnects (a new strategy in this process, :func:`ralp.ps_strategy.connect.reconnect`),
  restores the last checkpoint, and goes on from there to the steps asked for. The
  failure, the steps done again and the time lost go into ``History.failures``.

The data position is the number of batches each worker's input has given since the fit
began: after a restore, each worker's input pipeline skips its share (exact under a
synchronization paradigm, which knows which worker ran each step; ``steps // workers`` per
worker under the coordinator's schedule, which does not).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import tensorflow as tf

from ralp.cluster.probe import describe, wait_until_reachable
from ralp.cluster.spec import ClusterError
from ralp.errors import InvalidArgumentError
from ralp.ps_strategy.callbacks import History, call_callbacks
from ralp.ps_strategy.data import DatasetFn, skipping
from ralp.ps_strategy.health import TaskLost, failed_ps_tasks, is_ps_failure
from ralp.ps_strategy.loops import EpochRun
from ralp.training.checkpoints import (
    Checkpointer,
    CheckpointError,
    Failure,
    Position,
    Recoveries,
    TrainingState,
    describe_mismatch,
    fingerprint,
    read_checkpoint,
)

# A step's results (ralp.ps_strategy.steps): loss, correct, applied, then the user's metrics.
APPLIED, METRICS = 2, 3
SAVE_ATTEMPTS = 2
PROBE_AFTER_ERROR_S = 1.0  # a killed task's port refuses at once; a restarted one is back


class FitLoop:
    """One ``fit`` of ``trainer`` (see the module's docstring)."""

    def __init__(self, trainer, *, dataset_fn: DatasetFn, steps_per_epoch: int, epochs: int,
                 batch_size: int, callbacks: Sequence, hooks: Sequence, verbose: int,
                 make_runner: Callable[[], object], synced: bool, label: str,
                 checkpointer: Checkpointer | None, restart_timeout: float,
                 validation=None, initial_epoch: int = 0):
        self.trainer = trainer
        self.dataset_fn = dataset_fn
        self.steps_per_epoch, self.epochs, self.batch_size = steps_per_epoch, epochs, batch_size
        self.callbacks, self.hooks, self.verbose = list(callbacks), list(hooks), verbose
        self.make_runner, self.synced, self.label = make_runner, synced, label
        self.checkpointer = checkpointer
        self.restart_timeout = restart_timeout
        self.history = History()
        self.position = Position(worker_batches=[0] * trainer.connection.num_workers,
                                 epoch=initial_epoch)
        self.validation = validation
        self._inputs = None  # made once per connection, skipping what the position says
        self._recoveries = Recoveries(self.history)  # failures awaiting their time lost

    # ------------------------------------------------------------------ the loop

    def run(self) -> History:
        runner = self.make_runner()  # first: its checks fail before anything is made
        self._resume_or_begin()
        for cb in self.callbacks:
            cb.set_model(self.trainer.model)
        self.trainer.model.stop_training = False
        call_callbacks(self.callbacks, "on_train_begin")
        while self.position.epoch < self.epochs:
            runner = self._epoch(runner)
            if self.trainer.model.stop_training:
                break
        self._save(finished=True)
        logs = {k: v[-1] for k, v in self.history.history.items() if v}
        call_callbacks(self.callbacks, "on_train_end", logs)
        return self.history

    def _epoch(self, runner):
        pos, history = self.position, self.history
        epoch = pos.epoch
        call_callbacks(self.callbacks, "on_epoch_begin", epoch)
        from tqdm import tqdm

        label = f"epoch {epoch + 1}/{self.epochs}{self.label}"
        bar = tqdm(total=self.steps_per_epoch, initial=pos.step, desc=label, unit="batch",
                   disable=not self.verbose, leave=True)
        start = time.perf_counter()
        trained = 0  # steps trained in this epoch by this process (for images per second)
        try:
            while pos.step < self.steps_per_epoch:
                n = self.steps_per_epoch - pos.step
                every = self.checkpointer.every if self.checkpointer else None
                if every:
                    n = min(n, every - pos.done % every)
                try:
                    run = self._steps(runner, n, bar)
                except TaskLost as lost:
                    if self.checkpointer is None:
                        raise
                    runner = self._recover(lost, bar)
                    pos = self.position  # the restored one
                    if pos.epoch != epoch:  # restored into an earlier epoch
                        return runner
                    continue
                self._count(run, n)
                trained += n
                if self.checkpointer and every and pos.done % every == 0:
                    self._save()
        finally:
            bar.close()
        seconds = time.perf_counter() - start
        count = max(pos.step, 1)
        logs = {"loss": pos.epoch_loss_sum / count,
                "accuracy": pos.epoch_correct / (count * self.batch_size)}
        for metric, total in zip(self._metrics, self._metric_sums(), strict=True):
            logs[metric.name] = total / count  # the mean of per-batch values, as Trainer's
        for key, value in logs.items():
            history.history.setdefault(key, []).append(float(value))
        history.epoch_seconds.append(seconds)
        history.images_per_second.append(trained * self.batch_size / seconds if seconds else 0.0)
        pos.epoch, pos.step, pos.epoch_loss_sum, pos.epoch_correct = epoch + 1, 0, 0.0, 0.0
        pos.epoch_metric_sums = [0.0] * len(self._metrics)
        if self.validation is not None and self.validation.due(epoch):
            logs.update(self.validation.logs(self.trainer))
            for key in (k for k in logs if k.startswith("val_")):
                history.history.setdefault(key, []).append(float(logs[key]))
        if self.checkpointer:
            self._save()
        call_callbacks(self.callbacks, "on_epoch_end", epoch, logs)
        return runner

    def _steps(self, runner, n: int, bar) -> EpochRun:
        """Run ``n`` steps; a lost task or a step failing from a restarted PS is TaskLost."""
        trainer, history, pos = self.trainer, self.history, self.position
        base, seen = pos.done, [0]

        def on_step(fetch) -> None:
            seen[0] += 1
            bar.update(1)
            self._recoveries.note_time_lost(base + seen[0])
            if self.callbacks:  # Keras' batch logs: the step's loss (fetched only if wanted)
                logs = {"loss": float(np.asarray(fetch()[0]))}
                call_callbacks(self.callbacks, "on_train_batch_end", pos.step + seen[0] - 1, logs)

        trainer.watch.steps_done = lambda: base + seen[0]
        try:
            with trainer.watch.coordinator_reports():
                run = runner.run(self._inputs_now(), n, on_step)
        except tf.errors.OpError as e:
            self._probe_after_error(runner)  # a lost task: TaskLost, as the watch would judge
            # the error raised can be another closure's, failed with the PS (an input
            # iterator cancelled: OutOfRange) while the coordinator reported the PS's loss
            report = getattr(trainer.watch, "ps_failure_report", None)
            if is_ps_failure(e) or (report and isinstance(e, tf.errors.OutOfRangeError)):
                cause = e if is_ps_failure(e) else report
                raise TaskLost(f"a parameter server failed or was restarted "
                               f"({str(cause).splitlines()[0]}); its variables are gone with it. "
                               "Give fit a checkpoint_dir to go on from the last checkpoint once "
                               "it is restarted",
                               failed_ps_tasks(cause, trainer.connection.spec)) from None
            if isinstance(e, tf.errors.UnavailableError):
                raise ClusterError(f"a task of the cluster became unreachable: {e.message}") from None
            raise
        finally:
            self._note_worker_failures()
        if run.record is not None:
            history.step_workers += run.workers
            history.sync.append(run.record)
            for hook in self.hooks:
                hook.records.append(run.record)
        return run

    @staticmethod
    def _probe_after_error(runner) -> None:
        """Probe the cluster with the runner's own check for a moment after a step failed:
        the step's error (a closed socket) can come before the watch's next probe, and a
        lost task is judged as the watch judges it (a lost PS, or a worker under a bounded
        paradigm, is :class:`TaskLost`; a lost worker otherwise a warning)."""
        check = getattr(runner, "check_cluster", None)
        if check is None:
            return
        deadline = time.monotonic() + PROBE_AFTER_ERROR_S
        while True:
            check()
            if time.monotonic() > deadline:
                return
            time.sleep(0.2)

    def _count(self, run: EpochRun, n: int) -> None:
        pos, history = self.position, self.history
        losses = [float(r[0]) for r in run.results]
        pos.epoch_loss_sum += float(np.sum(losses))
        pos.epoch_correct += float(sum(float(r[1]) for r in run.results))
        history.duplicate_steps += sum(1 for r in run.results if not bool(r[APPLIED]))
        pos.epoch_metric_sums = [total + sum(float(r[METRICS + k]) for r in run.results)
                                 for k, total in enumerate(self._metric_sums())]
        history.step_losses += losses
        history.step_end_times += run.end_times
        if self.synced:
            for w in run.workers:
                pos.worker_batches[w] += 1
        pos.step += n
        pos.done += n
        self.trainer.total_steps += n

    @property
    def _metrics(self) -> tuple:
        return self.trainer.metrics.metrics

    def _metric_sums(self) -> list[float]:
        """The epoch's metric sums (zeros for a position saved without them)."""
        sums = list(self.position.epoch_metric_sums)
        return sums + [0.0] * (len(self._metrics) - len(sums))

    def _inputs_now(self):
        if self._inputs is None:
            trainer, pos = self.trainer, self.position
            W = trainer.connection.num_workers
            skips = pos.worker_batches if self.synced else [pos.done // W] * W
            fn = skipping(self.dataset_fn, skips) if any(skips) else self.dataset_fn
            self._inputs = trainer.inputs.per_worker(fn) if self.synced else trainer.inputs.shared(fn)
        return self._inputs

    # ------------------------------------------------------------------ checkpoints

    def _state(self, finished: bool = False) -> TrainingState:
        t = self.trainer
        return TrainingState(fingerprint(t.model, t.optimizers, t.mode), replace(self.position),
                             t.total_steps, finished, dict(self.history.history),
                             list(self.history.failures))

    def _save(self, finished: bool = False) -> None:
        if self.checkpointer is None:
            return
        for attempt in range(SAVE_ATTEMPTS):
            try:
                self.checkpointer.save(self.trainer._checkpoint, self._state(finished))
                return
            except tf.errors.OpError as e:
                if is_ps_failure(e):
                    # The PS went while its variables were read: the next steps find it lost
                    # and go on from the previous checkpoint.
                    return
                if attempt + 1 == SAVE_ATTEMPTS:
                    raise
                # A save racing a worker's death can fail once; a save is idempotent. (The
                # PS answering "Unable to parse request" to the chief's read, seen so, now
                # reads as a PS failure: the save is skipped and the next interval saves.)
                time.sleep(1.0)

    def _resume_or_begin(self) -> None:
        """Restore the newest checkpoint in the directory; go on from its position if the fit
        that wrote it was interrupted. With none, save one now: a PS lost before the first
        interval then has something to go on from."""
        if self.checkpointer is None:
            return
        found = self.checkpointer.latest(self.trainer._checkpoint)
        if found is None:
            self._save()
            return
        prefix, state = self._restore(found)
        if not state.finished:
            self.position = state.position
            self.history.resumed_from_step = state.position.done
            self.history.rewind(state)
            self.history.failures = list(state.failures)
        if self.verbose:
            print(f"ralp: restored {prefix}" + ("" if state.finished else
                  f" (epoch {state.position.epoch + 1}, step {state.position.step})"))

    def _restore(self, found: tuple[str, TrainingState]) -> tuple[str, TrainingState]:
        prefix, state = found
        t = self.trainer
        current = fingerprint(t.model, t.optimizers, t.mode)
        if state.fingerprint != current:
            raise CheckpointError(f"the checkpoint in {self.checkpointer.directory} was written "
                                  f"for {describe_mismatch(state.fingerprint, current)}; use "
                                  "another checkpoint_dir for this model")
        read_checkpoint(t._checkpoint, prefix)
        t.total_steps = state.total_steps
        return prefix, state

    # ------------------------------------------------------------------ failures

    def _recover(self, lost: TaskLost, bar):
        """Wait for the lost tasks, reconnect, restore the last checkpoint; the new runner."""
        detected, clock = time.time(), time.perf_counter()
        t, pos = self.trainer, self.position
        # the steps finished when the task was lost, those of the interrupted chunk included
        # (pos.done counts whole chunks): what the restore takes back, to be done again. Read
        # before reconnecting, which gives the trainer a new watch.
        at_step = max(pos.done, t.watch.steps_done())
        names = ",".join(f"{job}:{index}" for job, index, _ in lost.tasks) or "ps"
        if self.verbose:
            bar.write(f"ralp: {lost}; waiting up to {self.restart_timeout:.0f} s for the cluster")
        missing = wait_until_reachable(t.connection.spec, self.restart_timeout)
        if missing:
            raise ClusterError(f"{lost}. The lost tasks did not come back within "
                               f"{self.restart_timeout:.0f} s: {describe(missing)} (restart "
                               "them, or raise restart_timeout)") from None
        t.reconnect()
        # The model is placed anew: the callbacks follow it, and stopping starts unasked.
        t.model.stop_training = False
        for cb in self.callbacks:
            cb.set_model(t.model)
        found = self.checkpointer.latest(t._checkpoint)
        if found is None:
            raise CheckpointError(f"{lost}, and {self.checkpointer.directory} holds no "
                                  "checkpoint to go on from") from None
        _, state = self._restore(found)
        self.position = state.position
        self._inputs = None
        self.history.rewind(state)
        redo, recovery_s = at_step - state.position.done, time.perf_counter() - clock
        self._recoveries.record(Failure(
            task=names, kind="worker" if names.startswith("worker") else "ps",
            at_step=at_step, detected_at=detected, restored_step=state.position.done,
            steps_redone=redo, recovery_s=recovery_s, message=str(lost)), clock)
        self._recoveries.note_time_lost(self.position.done)
        bar.n = self.position.step
        bar.refresh()
        if self.verbose:
            bar.write(f"ralp: reconnected in {recovery_s:.1f} s; going on from step "
                      f"{state.position.done} ({redo} steps to do again)")
        return self.make_runner()

    def _note_worker_failures(self) -> None:
        """Workers the probes saw lost (their steps rerun by the others) into the history."""
        watch, seen = self.trainer.watch, {(f.task, f.detected_at) for f in self.history.failures}
        for event in watch.events:
            if (event.task, event.lost_at) not in seen:
                self.history.failures.append(Failure(
                    task=event.task, kind="worker", at_step=event.at_step,
                    detected_at=event.lost_at, message="lost; its steps rerun by the others"))


def run_fit(trainer, x, y, *, batch_size: int, epochs: int, steps_per_epoch: int | None,
            dataset_fn: DatasetFn | None, validation_data, validation_split: float,
            validation_freq, initial_epoch: int, callbacks: Sequence, shuffle: bool,
            seed: int | None, verbose: int, checkpoint_dir, checkpoint_every: int | None,
            restart_timeout: float) -> History:
    """``Trainer.fit``'s checks, data and loop (its docstring says what each argument does)."""
    from ralp.ps_strategy.callbacks import StalenessHook
    from ralp.ps_strategy.data import numpy_dataset_fn
    from ralp.training.compile import check_training_arrays
    from ralp.training.validation import validation_for

    for name, value in (("batch_size", batch_size), ("epochs", epochs),
                        ("steps_per_epoch", steps_per_epoch)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
    if isinstance(initial_epoch, bool) or not isinstance(initial_epoch, int) or not (
            0 <= initial_epoch < epochs):
        raise InvalidArgumentError(f"initial_epoch must be an integer in [0, epochs={epochs}), got "
                         f"{initial_epoch!r}")
    x, y, validation = validation_for(x, y, validation_data=validation_data,
                                      validation_split=validation_split,
                                      validation_freq=validation_freq)
    if validation is not None and validation.x is not None:
        check_training_arrays(validation.x, validation.y, trainer.original, "validation_data")
    if dataset_fn is None:
        if x is None or y is None:
            raise InvalidArgumentError("fit needs x and y arrays, or a dataset_fn")
        check_training_arrays(x, y, trainer.original, where="fit")
        dataset_fn = numpy_dataset_fn(x, y, batch_size, shuffle, seed)
        steps_per_epoch = steps_per_epoch or max(1, len(x) // batch_size)
    elif steps_per_epoch is None:
        raise InvalidArgumentError("with a dataset_fn, give steps_per_epoch")
    if checkpoint_every is not None and checkpoint_dir is None:
        raise InvalidArgumentError("checkpoint_every needs a checkpoint_dir to write to")
    sync, slow_worker = trainer.sync, trainer.slow_worker
    hooks = [cb for cb in callbacks if isinstance(cb, StalenessHook)]
    if len(hooks) > 1:
        raise InvalidArgumentError("give at most one StalenessHook per fit")
    if hooks:
        sync, slow_worker = hooks[0].policy, hooks[0].slow_worker or slow_worker
    checkpointer = None if checkpoint_dir is None else Checkpointer(checkpoint_dir, checkpoint_every)
    loop = FitLoop(trainer, dataset_fn=dataset_fn, steps_per_epoch=steps_per_epoch,
                   epochs=epochs, batch_size=batch_size, callbacks=callbacks, hooks=hooks,
                   verbose=verbose, make_runner=lambda: trainer._steps_runner(sync, slow_worker),
                   synced=sync is not None, label=f" {sync}" if sync is not None else "",
                   checkpointer=checkpointer, restart_timeout=restart_timeout,
                   validation=validation, initial_epoch=initial_epoch)
    return loop.run()
