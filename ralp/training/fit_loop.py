"""The one ``fit`` loop of every mode: epochs of updates, Keras' callbacks and logs,
validation, checkpoints, and going on after a lost task.

What differs by mode is the *runtime* (:class:`ralp.training.runtime.Runtime`): it places each worker's data, runs updates and reports each one's sums
(:mod:`ralp.training.objective`), adds up sums over its processes, and saves and restores
checkpoints. The loop is the same in the coordinator of a parameter-server cluster and in
every rank of an allreduce job; in a job of several processes every one of them runs it with
the same arguments and meets the others at the same points (the runtime's collectives):

- each update's sums are added up over the processes at once when a callback wants Keras'
  per-batch logs (the progress bar included), else at the epoch's end and before each save;
- ``model.stop_training`` set by any process's callback stops every process together;
- the checkpoint is saved every ``checkpoint_every`` updates and at each epoch's end.

Keras' logs: ``on_train_batch_end(batch, logs)`` gets the epoch's running ``loss`` and
metrics, ``on_epoch_end(epoch, logs)`` the epoch's and ``val_*``, as Keras' ``fit`` gives
them. Resuming: with a ``checkpoint_dir`` holding a checkpoint of an interrupted fit, the fit
goes on from its position (epoch, update, each worker's data position, the epoch's running
figures); a lost task (parameter-server modes) is waited for, the cluster reconnected, and
training goes on from the last checkpoint (``History.failures``).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ralp.training.checkpoints import Failure, Position, Recoveries, TrainingState
from ralp.training.history import History
from ralp.training.model_view import ModelView, ViewCallbacks, callbacks_here, saves_by_batch
from ralp.training.objective import EpochSums, step_loss
from ralp.training.runtime import Runtime


def _wants_batch_logs(callbacks) -> bool:
    """Whether a callback does anything with per-batch logs (Keras' own test)."""
    return any(getattr(cb, "_implements_train_batch_hooks", lambda: True)()
               for cb in callbacks)


class FitLoop:
    """One ``fit`` (the module's docstring). ``validation`` is a
    :class:`ralp.training.validation.Validation` or None; ``store`` the runtime's checkpoints
    or None."""

    def __init__(self, runtime: Runtime, data, objective, *, epochs: int, initial_epoch: int,
                 callbacks, verbose: int, validation, store, restart_timeout: float,
                 seed: int | None, evaluate, view: ModelView):
        self.runtime, self.data, self.objective = runtime, data, objective
        self.view = view
        self.epochs, self.verbose = epochs, verbose
        self.validation, self.store, self.evaluate = validation, store, evaluate
        self.restart_timeout = restart_timeout
        self.sharding = runtime.sharding(data)
        self.steps_per_epoch = data.steps_per_epoch(self.sharding)
        self.seed = runtime.shared_seed(seed)
        self.history = History()
        self.position = Position(epoch=initial_epoch,
                                 worker_batches=[0] * self.sharding.workers)
        user = list(callbacks or [])
        self.batch_logs = runtime.agree(bool(verbose == 1 and runtime.is_chief)
                                        or _wants_batch_logs(user))
        self.stop_per_batch = runtime.agree(_wants_batch_logs(user))
        ranks = view.ranks
        # the runtime may run ahead of the callbacks (a parameter-server cluster's steps in
        # flight): it stops at every update a callback saves the model after
        self.save_freqs = sorted({cb.save_freq for cb in user if saves_by_batch(cb)})
        self.first_update = 0  # the update this fit starts from (set by run)
        here = callbacks_here(user, runtime.is_chief, ranks)
        self.callbacks = ViewCallbacks(
            [*here, self.history], view,
            batch_pulls=ranks > 1 and runtime.agree(any(map(saves_by_batch, user))),
            agree=runtime.agree, per_batch_agree=ranks == 1 or self.stop_per_batch,
            add_history=False, add_progbar=bool(verbose) and runtime.is_chief,
            verbose=verbose, epochs=epochs, steps=self.steps_per_epoch)
        self._recoveries = Recoveries(self.history)
        self._pending: list[np.ndarray] = []  # this process's sums not added up yet
        self.sums = EpochSums(objective)

    def say(self, text: str) -> None:
        if self.verbose and self.runtime.is_chief:
            print(f"ralp: {text}", flush=True)

    # ------------------------------------------------------------------ the loop

    def run(self) -> History:
        self._resume()
        self.view.stale = True  # a fit may start from a restored checkpoint
        model = self.view.model
        model.stop_training = False
        # the workers' data first, as Keras makes its iterator before on_train_begin: a worker
        # that hangs once training has begun then hangs a step, which the step timeout sees
        self.runtime.begin(self.objective, self.data, self.sharding, self.seed, self.position)
        self.callbacks.on_train_begin()
        if self._start_where_callbacks_ask():  # a callback's backup: the data starts there
            self.runtime.begin(self.objective, self.data, self.sharding, self.seed,
                               self.position)
        self.first_update = self.position.done
        logs: dict = {}
        while self.position.epoch < self.epochs:
            logs = self._epoch()
            if self.runtime.agree(bool(model.stop_training)):
                break
        if self.store is not None:
            self._save(finished=True)
            self.store.finish()
        self.callbacks.on_train_end(logs)
        self.runtime.finish()
        return self.history

    def _start_where_callbacks_ask(self) -> bool:
        """Start at the epoch a callback restored (``BackupAndRestore``, on rank 0), as Keras'
        ``fit`` does; whether that moved the start."""
        asked = self.runtime.share_text(str(self.callbacks.initial_epoch() or 0))
        if int(asked) <= self.position.epoch:
            return False
        self.position.epoch, self.position.step, self.position.epoch_sums = int(asked), 0, None
        self.say(f"starting at epoch {int(asked) + 1}, where a callback's backup left off")
        return True

    def _epoch(self) -> dict:
        pos = self.position
        epoch = pos.epoch
        self.callbacks.on_epoch_begin(epoch)
        self.sums.restore(pos.epoch_sums)
        start, trained = time.perf_counter(), 0
        stopped = False
        while pos.step < self.steps_per_epoch and not stopped:
            n = self.steps_per_epoch - pos.step
            every = self.store.every if self.store is not None else None
            if every:
                n = min(n, every - pos.done % every)
            for freq in self.save_freqs:  # a callback saving then sees that very update
                n = min(n, freq - (pos.done - self.first_update) % freq)
            before = pos.done
            try:
                stopped = self.runtime.run(n, on_begin=self._on_begin, on_update=self._on_update,
                                           history=self.history)
            except Exception as error:  # noqa: BLE001 - the runtime says which it survives
                if not self._recover(error):
                    raise
                pos = self.position
                if pos.epoch != epoch:  # restored into an earlier epoch
                    return {}
                continue
            trained += pos.done - before
            self._recoveries.note_time_lost(pos.done)
            if self.store is not None and every and pos.done % every == 0 \
                    and pos.step < self.steps_per_epoch:
                self._save()
        return self._end_epoch(epoch, time.perf_counter() - start, trained)

    def _on_begin(self, update: int) -> None:
        self.callbacks.on_train_batch_begin(self.position.step + update)

    def _on_update(self, sums: np.ndarray) -> bool:
        """One update done, with this process's ``sums``; True to stop the epoch here."""
        pos, history = self.position, self.history
        history.step_end_times.append(time.perf_counter())
        pos.step += 1
        pos.done += 1
        self.view.note_update()
        if self.store is not None:
            self.store.step_done(pos.done)
        if not self.batch_logs:
            self._pending.append(np.asarray(sums, np.float64))
            return False
        total = self.runtime.reduce(np.asarray(sums, np.float64)[None])[0]
        self.sums.add(total)
        history.step_losses.append(step_loss(total))
        self.callbacks.on_train_batch_end(pos.step - 1, self.sums.logs())
        model = self.view.model
        if self.stop_per_batch:
            return self.runtime.agree(bool(model.stop_training))
        return bool(model.stop_training)

    def _flush(self) -> None:
        """Add up the sums not added up yet (a collective on every process at once)."""
        rows = np.asarray(self._pending, np.float64).reshape(-1, self.objective.width)
        self._pending = []
        for total in self.runtime.reduce(rows) if len(rows) else []:
            self.sums.add(total)
            self.history.step_losses.append(step_loss(total))

    def _end_epoch(self, epoch: int, seconds: float, trained: int) -> dict:
        self._flush()
        pos, history = self.position, self.history
        logs = self.sums.logs()
        samples_per_update = self.sums.samples / max(pos.step, 1)
        history.epoch_seconds.append(seconds)
        history.images_per_second.append(trained * samples_per_update / seconds if seconds
                                         else 0.0)
        if self.validation is not None and self.validation.due(epoch):
            logs.update({f"val_{k}": v for k, v in self.evaluate(self.validation).items()})
        pos.epoch, pos.step, pos.epoch_sums = epoch + 1, 0, None
        self.callbacks.on_epoch_end(epoch, logs)
        if self.store is not None:
            self._save()
        return logs

    # ------------------------------------------------------------------ checkpoints

    def _state(self, finished: bool = False) -> TrainingState:
        self.position.epoch_sums = self.sums.to_state() if self.position.step else None
        return TrainingState({}, replace(self.position), self.runtime.total_steps, finished,
                             dict(self.history.history), list(self.history.failures))

    def _save(self, finished: bool = False) -> None:
        self._flush()
        began = time.perf_counter()
        self.runtime.sync_statistics()  # every rank's checkpointed replica the same
        self.store.save(self._state(finished))
        self.history.save_seconds.append(time.perf_counter() - began)

    def _resume(self) -> None:
        """Go on from the newest checkpoint of an interrupted fit; with none, save one now (a
        task lost before the first interval then has something to go on from)."""
        if self.store is None:
            return
        state = self.store.restore()
        if state is None:
            self.store.restored(None, self.history)
            self._save()
            return
        if not state.finished:
            self._adopt(state)
            self.history.resumed_from_step = state.position.done
            self.history.failures = list(state.failures)
            self.say(f"went on from the checkpoint in {self.store.directory} (epoch "
                     f"{state.position.epoch + 1}, step {state.position.step})")
        self.store.restored(state, self.history)

    def _adopt(self, state: TrainingState) -> None:
        self.position = replace(state.position)
        self.sums.restore(self.position.epoch_sums)
        if len(self.position.worker_batches) != self.sharding.workers:
            self.position.worker_batches = [0] * self.sharding.workers
        self.history.resume(state, self.position.epoch)

    # ------------------------------------------------------------------ failures

    def _recover(self, error: BaseException) -> bool:
        """After ``error`` in the runtime's steps: whether training goes on. A task the
        runtime can wait for (``runtime.recoverable``) with a checkpoint to go on from: wait,
        reconnect, restore the last checkpoint."""
        if self.store is None or not self.runtime.recoverable(error):
            return False
        detected, clock = time.time(), time.perf_counter()
        at_step = max(self.position.done, self.runtime.steps_seen())
        self.say(f"{error}; waiting up to {self.restart_timeout:.0f} s for the cluster")
        self.runtime.recover(error, self.restart_timeout)
        state = self.store.restore()
        if state is None:
            from ralp.training.checkpoints import CheckpointError

            raise CheckpointError(f"{error}, and {self.store.directory} holds no checkpoint "
                                  "to go on from") from None
        self._pending = []
        self._adopt(state)
        self.runtime.begin(self.objective, self.data, self.sharding, self.seed, self.position)
        self.view.model.stop_training = False
        self.view.stale = True  # the restored state: what callbacks see next
        redo, recovery_s = at_step - state.position.done, time.perf_counter() - clock
        names = ",".join(f"{job}:{index}" for job, index, _ in getattr(error, "tasks", [])) \
            or "ps"
        self._recoveries.record(Failure(
            task=names, kind="worker" if names.startswith("worker") else "ps",
            at_step=at_step, detected_at=detected, restored_step=state.position.done,
            steps_redone=redo, recovery_s=recovery_s, message=str(error)), clock)
        self._recoveries.note_time_lost(self.position.done)
        self.say(f"reconnected in {recovery_s:.1f} s; going on from step "
                 f"{state.position.done} ({redo} steps to do again)")
        return True
