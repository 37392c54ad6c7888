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
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ralp.errors import InvalidArgumentError


@dataclass
class RankHistory:
    """What ``fit`` returns on each rank: per-epoch logs (``history``, as Keras' History),
    and per step the wall-clock end time and this rank's loss (None where it has none)."""

    history: dict[str, list[float]] = field(default_factory=dict)
    step_end_times: list[float] = field(default_factory=list)
    step_losses: list[float | None] = field(default_factory=list)


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


def fit_epochs(trainer, x=None, y=None, *, batches: Iterable | None = None,
               batch_size: int = 32, epochs: int = 1, steps_per_epoch: int | None = None,
               validation_data=None, validation_split: float = 0.0, validation_freq=1,
               initial_epoch: int = 0, callbacks: Sequence = (), shuffle: bool = True,
               seed: int = 0) -> RankHistory:
    """Train ``trainer`` (a ``HorovodTrainer`` or ``StanzaTrainer``) for epochs
    ``initial_epoch`` .. ``epochs`` - 1; the module's docstring says what each rank does."""
    from ralp.models.training import check_training_arrays
    from ralp.models.validation import validation_for

    if not 0 <= initial_epoch < epochs:
        raise InvalidArgumentError(f"initial_epoch must be in [0, epochs={epochs}), got {initial_epoch}")
    x, y, validation = validation_for(x, y, validation_data=validation_data,
                                      validation_split=validation_split,
                                      validation_freq=validation_freq)
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
    iterator = iter(batches) if shard and batches is not None else None
    history, logs = RankHistory(), {}
    for cb in callbacks:
        cb.set_model(trainer.model)
    trainer.model.stop_training = False
    _call(callbacks, "on_train_begin")
    for epoch in range(initial_epoch, epochs):
        _call(callbacks, "on_epoch_begin", epoch)

        def on_step(k: int, loss: float | None) -> None:
            history.step_end_times.append(time.perf_counter())
            history.step_losses.append(loss)
            _call(callbacks, "on_train_batch_end", k, {} if loss is None else {"loss": loss})

        run = trainer.run_steps(iterator, steps_per_epoch, on_step=on_step)
        logs = {"loss": trainer.mean_loss(run.step_losses)}
        if validation is not None and validation.due(epoch):
            x_val, y_val = validation.arrays()
            logs.update({f"val_{k}": v for k, v in trainer.evaluate(x_val, y_val).items()})
        for key, value in logs.items():
            history.history.setdefault(key, []).append(float(value))
        _call(callbacks, "on_epoch_end", epoch, logs)
        if trainer.agree(bool(trainer.model.stop_training)):
            break
    _call(callbacks, "on_train_end", logs)
    return history


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
