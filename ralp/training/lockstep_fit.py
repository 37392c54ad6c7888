"""``fit`` as Keras users know it, for the lockstep trainers (Horovod's, Stanza's and the
collective one).

Every rank calls ``fit`` with the same arguments. Each rank that reads data trains on its
shard of ``x`` (rank r of n reads rows r, r + n, ...) or on the ``batches`` it is given; the
epoch's ``loss`` is the mean over every step of the global batch, the same on every rank (a
collective), and ``validation_data`` or ``validation_split`` is evaluated after the epochs
``validation_freq`` names on every rank with the trained model (``val_*``). Callbacks get
Keras' hooks and logs on every rank (write files from rank 0 only); ``model.stop_training``
(``keras.callbacks.EarlyStopping``) stops every rank when any rank sets it, so that all
leave their collectives together.

With a ``checkpoint_dir`` the fit saves every ``checkpoint_every`` steps and at each epoch's
end (:mod:`ralp.training.rank_checkpoints`) and goes on from the newest checkpoint there:
its weights, optimizer state, step, data position and the epoch's figures. A job restarted by
a supervisor (:mod:`ralp.cluster.supervise`) learns what was lost from ``RALP_RESTART_FAILURE``
and lists it in ``history.failures``.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ralp.errors import InvalidArgumentError


@dataclass
class RankHistory:
    """What ``fit`` returns on each rank: per-epoch logs (``history``, as Keras' History),
    per step the wall-clock end time and this rank's loss (None where it has none), and the
    failures the job was restarted after (``failures``: :class:`ralp.training.checkpoints.
    Failure`, kind "rank"; kept in the checkpoints, so a job restarted twice lists both)."""

    history: dict[str, list[float]] = field(default_factory=dict)
    step_end_times: list[float] = field(default_factory=list)
    step_losses: list[float | None] = field(default_factory=list)
    failures: list = field(default_factory=list)
    resumed_from_step: int | None = None  # the checkpoint's step this fit went on from
    save_seconds: list[float] = field(default_factory=list)  # each checkpoint's, on this rank

    @property
    def steps_redone(self) -> int:
        return sum(f.steps_redone or 0 for f in self.failures)


@dataclass
class StepHistory:
    """What a lockstep trainer's ``run_steps`` did on this rank: per step, the wall-clock end
    time (``time.perf_counter``), this rank's batch loss and the user's metrics."""

    step_end_times: list[float] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)
    step_metrics: dict[str, list[float]] = field(default_factory=dict)


def run_train_steps(train_step, metric_names: Sequence[str], batches: Iterable, steps: int,
                    on_step=None) -> StepHistory:
    """``steps`` calls of ``train_step(x, y) -> (loss, metric values)`` on ``batches``;
    ``on_step(step_index, loss)`` after each (the loss read: the step has finished)."""
    history = StepHistory()
    iterator = iter(batches)
    for k in range(steps):
        x, y = next(iterator)
        loss, values = train_step(x, y)
        loss = float(loss)
        history.step_end_times.append(time.perf_counter())
        history.step_losses.append(loss)
        for name, value in zip(metric_names, values, strict=True):
            history.step_metrics.setdefault(name, []).append(float(value))
        if on_step is not None:
            on_step(k, loss)
    return history


RESTART_FAILURE_ENV = "RALP_RESTART_FAILURE"  # set by a supervisor restarting the job
SUPERVISED_ENV = "RALP_SUPERVISED"  # "1": rank 0 reports each step done to the supervisor


def fit_epochs(trainer, x=None, y=None, *, batches: Iterable | None = None,
               batch_size: int = 32, epochs: int = 1, steps_per_epoch: int | None = None,
               validation_data=None, validation_split: float = 0.0, validation_freq=1,
               initial_epoch: int = 0, callbacks: Sequence = (), shuffle: bool = True,
               seed: int = 0, checkpoint_dir=None, checkpoint_every: int | None = None
               ) -> RankHistory:
    """Train ``trainer`` (a ``HorovodTrainer``, ``StanzaTrainer`` or ``CollectiveTrainer``)
    for epochs ``initial_epoch`` .. ``epochs`` - 1, going on from the newest checkpoint in
    ``checkpoint_dir`` if there is one; the module's docstring says what each rank does."""
    from ralp.training.validation import validation_for

    if not 0 <= initial_epoch < epochs:
        raise InvalidArgumentError(f"initial_epoch must be in [0, epochs={epochs}), got {initial_epoch}")
    x, y, validation = validation_for(x, y, validation_data=validation_data,
                                      validation_split=validation_split,
                                      validation_freq=validation_freq)
    iterator, steps_per_epoch = _rank_batches(trainer, x, y, batches, batch_size,
                                              steps_per_epoch, shuffle, seed)
    history = RankHistory()
    resume = Resume(trainer, history, checkpoint_dir, checkpoint_every, initial_epoch)
    if iterator is not None:
        for _ in range(resume.position.done):  # the data position: batches already trained on
            next(iterator)
    for cb in callbacks:
        cb.set_model(trainer.model)
    trainer.model.stop_training = False
    _call(callbacks, "on_train_begin")
    logs: dict = {}
    for epoch in range(resume.position.epoch, epochs):
        _call(callbacks, "on_epoch_begin", epoch)
        logs = {"loss": _train_epoch(trainer, history, resume, iterator, steps_per_epoch,
                                     epoch, callbacks)}
        if validation is not None and validation.due(epoch):
            x_val, y_val = validation.arrays()
            logs.update({f"val_{k}": v for k, v in trainer.evaluate(x_val, y_val).items()})
        for key, value in logs.items():
            history.history.setdefault(key, []).append(float(value))
        _call(callbacks, "on_epoch_end", epoch, logs)
        stop = trainer.agree(bool(trainer.model.stop_training))
        resume.epoch_done(epoch + 1, finished=stop or epoch + 1 == epochs)
        if stop:
            break
    _call(callbacks, "on_train_end", logs)
    return history


def _rank_batches(trainer, x, y, batches, batch_size, steps_per_epoch, shuffle, seed):
    """(this rank's batch iterator or None where it reads none, steps per epoch)."""
    from ralp.training.compile import check_training_arrays

    shard = trainer.data_shard  # (index, count) of the ranks that read data; None: reads none
    if batches is None:
        if x is None or y is None:
            raise InvalidArgumentError("fit needs x and y arrays (the same on every rank), or batches")
        check_training_arrays(x, y, trainer.model, where="fit")
        count = shard[1] if shard else trainer.data_ranks
        steps_per_epoch = steps_per_epoch or max(1, len(x) // (count * batch_size))
        if shard:
            batches = _shard_batches(x[shard[0]::shard[1]], y[shard[0]::shard[1]], batch_size,
                                     shuffle, seed + shard[0])
    elif steps_per_epoch is None:
        raise InvalidArgumentError("with batches, give steps_per_epoch (the same on every rank)")
    return (iter(batches) if shard and batches is not None else None), steps_per_epoch


def _train_epoch(trainer, history: RankHistory, resume: Resume, iterator, steps_per_epoch: int,
                 epoch: int, callbacks) -> float:
    """The epoch's steps from where ``resume`` stands, saving at every checkpoint due; the
    epoch's mean loss over the global batch (the steps before a restart included)."""
    losses: list[float | None] = []
    first = resume.position.step

    def on_step(k: int, loss: float | None) -> None:
        history.step_end_times.append(time.perf_counter())
        history.step_losses.append(loss)
        losses.append(loss)
        resume.step_done()
        _call(callbacks, "on_train_batch_end", first + k, {} if loss is None else {"loss": loss})

    while resume.position.step < steps_per_epoch:
        first = resume.position.step
        trainer.run_steps(iterator, resume.steps_until_save(steps_per_epoch), on_step=on_step)
        if resume.position.step < steps_per_epoch and resume.save_due():
            resume.save(epoch, trainer.mean_loss(losses), len(losses))
    return resume.epoch_loss(trainer.mean_loss(losses), len(losses))


class Resume:
    """Where a lockstep fit stands (:class:`ralp.training.checkpoints.Position`), the
    checkpoints it saves and went on from, and the restart it recovers from (the failure a
    supervisor passes in ``RALP_RESTART_FAILURE``)."""

    def __init__(self, trainer, history: RankHistory, directory, every: int | None,
                 initial_epoch: int):
        from ralp.training.checkpoints import Position

        self.trainer, self.history = trainer, history
        self.position = Position(epoch=initial_epoch)
        self.total_steps = 0  # this model's steps over all fits: the checkpoint's number
        self.carried = (0.0, 0)  # (loss sum, steps) of this epoch before the checkpoint
        self.checkpoints = None
        self.pending = None  # the restart's failure, until training is back where it was lost
        self.report = os.environ.get(SUPERVISED_ENV) == "1" and trainer.rank == 0
        if directory is None:
            if every is not None:
                raise InvalidArgumentError("checkpoint_every needs a checkpoint_dir")
            return
        from ralp.training.rank_checkpoints import LockstepCheckpoints

        self.checkpoints = LockstepCheckpoints(trainer, directory, every,
                                               trainer.checkpoint_fingerprint())
        self._restore()

    def _restore(self) -> None:
        state = self.checkpoints.restore()
        if state is not None:
            self.total_steps = state.total_steps
            if not state.finished:  # a finished fit's checkpoint gives its weights only
                self.position = state.position
                self.carried = (state.position.epoch_loss_sum, state.position.step)
                self.history.history = {k: list(v) for k, v in state.epoch_logs.items()}
                self.history.failures = list(state.failures)
                self.history.resumed_from_step = state.position.done
        self._note_restart()

    def _note_restart(self) -> None:
        import json

        from ralp.training.checkpoints import Failure

        raw = os.environ.pop(RESTART_FAILURE_ENV, None)  # this process's first fit only
        if not raw:
            return
        failure = Failure(**json.loads(raw))
        if any(f.detected_at == failure.detected_at for f in self.history.failures):
            return  # already recorded by an earlier restart
        failure.restored_step = self.position.done
        failure.steps_redone = max(0, failure.at_step - self.position.done)
        failure.recovery_s = round(time.time() - failure.detected_at, 3)
        self.history.failures.append(failure)
        self.pending = failure
        self._check_back()

    def _check_back(self) -> None:
        if self.pending is not None and self.position.done >= self.pending.at_step:
            self.pending.time_lost_s = round(time.time() - self.pending.detected_at, 3)
            self.pending = None

    def step_done(self) -> None:
        self.position.step += 1
        self.position.done += 1
        self.total_steps += 1
        self._check_back()
        if self.report:  # a marker line: the supervisor knows the step a loss came at
            from ralp._messages import emit

            emit("step", self.position.done)
        if self.checkpoints is not None and self.checkpoints.pending:
            self._timed(self.checkpoints.finish, more=True)  # its copies crossed in this step

    def _timed(self, action, more: bool = False) -> None:
        """Run ``action``, its time a checkpoint's (``more``: the last one's commit)."""
        start = time.perf_counter()
        action()
        seconds = time.perf_counter() - start
        if more:
            self.history.save_seconds[-1] += seconds
        else:
            self.history.save_seconds.append(seconds)

    def steps_until_save(self, steps_per_epoch: int) -> int:
        left = steps_per_epoch - self.position.step
        every = self.checkpoints.every if self.checkpoints else None
        return min(left, every - self.position.done % every) if every else left

    def save_due(self) -> bool:
        return self.checkpoints is not None and self.checkpoints.due(self.position.done)

    def epoch_loss(self, mean: float, steps: int) -> float:
        """The epoch's mean loss, its steps before the checkpoint this fit went on from
        included (each rank runs the same steps, so the means compose by step counts)."""
        carried_sum, carried_steps = self.carried
        total = carried_steps + steps
        return (carried_sum + mean * steps) / total if total else mean

    def save(self, epoch: int, mean: float, steps: int, finished: bool = False) -> None:
        from ralp.training.checkpoints import TrainingState

        self.position.epoch = epoch
        self.position.epoch_loss_sum = self.carried[0] + mean * steps
        # copies: the state may be committed a step later (Stanza's copies cross first)
        state = TrainingState(self.checkpoints.fingerprint, copy.deepcopy(self.position),
                              self.total_steps, finished, copy.deepcopy(self.history.history),
                              copy.deepcopy(self.history.failures))
        self._timed(lambda: self.checkpoints.save(state))
        if finished:  # no step follows: the copies are waited for now
            self._timed(self.checkpoints.finish, more=True)

    def epoch_done(self, next_epoch: int, finished: bool) -> None:
        """An epoch ended (its logs in the history): checkpoint there, the next epoch's
        start."""
        self.position.epoch, self.position.step = next_epoch, 0
        self.carried = (0.0, 0)
        if self.checkpoints is not None:
            self.save(next_epoch, 0.0, 0, finished=finished)


def _shard_batches(x, y, batch_size: int, shuffle: bool, seed: int):
    """This rank's batches of its shard, endless, reshuffled each pass."""
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(len(x)) if shuffle else np.arange(len(x))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            rows = order[start : start + batch_size]
            yield x[rows], y[rows]


def _call(callbacks: Sequence, hook: str, *args) -> None:
    for cb in callbacks:
        getattr(cb, hook)(*args)
