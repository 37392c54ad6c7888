"""What ``fit`` returns: Keras' ``History`` (``history.history``, ``history.epoch``), with the
per-step figures and the failures ralp records beside it."""

from __future__ import annotations

import keras

from ralp.training.checkpoints import TrainingState


class History(keras.callbacks.History):
    """Keras' ``History`` callback and return value: ``history`` holds each epoch's logs
    (``loss``, the metrics, ``val_*``), ``epoch`` the epochs trained, ``params`` fit's. Beside
    them, per update (a synchronous step of every worker, or one worker's asynchronous step):

    - ``step_losses``: its loss (Keras' on its batch: the compiled loss plus the model's own);
    - ``step_end_times``: when it was seen finished (``time.perf_counter()``, this process);
    - ``epoch_seconds`` and ``images_per_second`` per epoch;
    - ``failures``: each failure survived (:class:`ralp.training.checkpoints.Failure`), and
      ``steps_redone`` / ``time_lost_s`` over them; ``resumed_from_step``: the step a fit
      went on from, if it went on from an interrupted fit's checkpoint;
    - parameter-server modes: ``duplicate_steps`` (reruns of a step whose update had been
      applied: computed again, applied once); under a synchronization paradigm
      ``step_workers`` (which worker ran each step) and ``sync`` (each epoch's
      :class:`ralp.ps_strategy.staleness.SyncRecord`);
    - ``save_seconds``: how long each checkpoint took to save on this process.
    """

    def __init__(self):
        super().__init__()
        self.history: dict[str, list[float]] = {}
        self.epoch: list[int] = []
        self.step_losses: list[float] = []
        self.step_end_times: list[float] = []
        self.epoch_seconds: list[float] = []
        self.images_per_second: list[float] = []
        self.failures: list = []
        self.duplicate_steps = 0
        self.step_workers: list[int] = []
        self.sync: list = []
        self.save_seconds: list[float] = []
        self.resumed_from_step: int | None = None

    def on_train_begin(self, logs=None):  # Keras' would empty a resumed fit's epochs
        pass

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(float(value))
        # Keras' History keeps a reference to the model; ralp's does not hold a cluster's
        # placed model past the fit.

    @property
    def steps_redone(self) -> int:
        """Steps trained again after restoring a checkpoint, over every failure."""
        return sum(f.steps_redone or 0 for f in self.failures)

    @property
    def time_lost_s(self) -> float:
        """Seconds from detecting each failure until training was back where it had been."""
        return sum(f.time_lost_s or 0.0 for f in self.failures)

    def resume(self, state: TrainingState, first_epoch: int) -> None:
        """Start from a restored checkpoint's epochs (its logs), dropping the per-step and
        per-epoch figures after it (they are done again)."""
        keep = max(0, state.position.done - (self.resumed_from_step or 0))
        self.step_losses = self.step_losses[:keep]
        self.step_end_times = self.step_end_times[:keep]
        self.history = {k: list(v) for k, v in state.epoch_logs.items()}
        epochs = len(next(iter(self.history.values()), []))
        self.epoch = list(range(first_epoch, first_epoch + epochs))[:epochs]
        self.epoch_seconds = self.epoch_seconds[:epochs]
        self.images_per_second = self.images_per_second[:epochs]
