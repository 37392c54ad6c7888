"""What ``fit`` reports (:class:`History`) and the callbacks it understands.

Callbacks get Keras' train, epoch and train-batch-end hooks. :class:`StalenessHook` is a
Keras-style callback that trains one ``fit`` under a synchronization paradigm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import keras

from ralp.ps_strategy.staleness import SyncPolicy, SyncRecord, as_policy
from ralp.ps_strategy.sync import SlowWorker
from ralp.training.checkpoints import Failure, TrainingState


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
    # Failures survived (a PS restarted: steps done again from the last checkpoint; a worker
    # lost: its steps rerun by the others), in order.
    failures: list[Failure] = field(default_factory=list)
    # Reruns of a step whose update had been applied already (its worker died after the
    # update): computed again, applied once.
    duplicate_steps: int = 0
    # Set when the fit went on from a checkpoint of an earlier, interrupted fit: the step it
    # resumed at (step_losses then start there).
    resumed_from_step: int | None = None

    @property
    def steps_redone(self) -> int:
        """Steps trained again after restoring a checkpoint, over every failure."""
        return sum(f.steps_redone or 0 for f in self.failures)

    @property
    def time_lost_s(self) -> float:
        """Seconds from detecting each failure until training was back where it had been."""
        return sum(f.time_lost_s or 0.0 for f in self.failures)

    def rewind(self, state: TrainingState) -> None:
        """Back to a restored checkpoint: per-step figures after it and epochs it had not
        finished are dropped (they are done again)."""
        keep = max(0, state.position.done - (self.resumed_from_step or 0))
        self.step_losses = self.step_losses[:keep]
        self.step_end_times = self.step_end_times[:keep]
        self.history = {"loss": [], "accuracy": [],
                        **{k: list(v) for k, v in state.epoch_logs.items()}}
        epochs = len(next(iter(self.history.values()), []))
        self.epoch_seconds = self.epoch_seconds[:epochs]
        self.images_per_second = self.images_per_second[:epochs]


class StalenessHook(keras.callbacks.Callback):
    """Train one ``fit`` under a synchronization paradigm, as a Keras-style callback:
    ``trainer.fit(..., callbacks=[ralp.StalenessHook("dssp", staleness=(3, 15))])``.

    ``sync`` is "bsp", "asp", "ssp" or "dssp" (or "ssp:3", "dssp:3:15"); ``staleness`` is
    SSP's bound s or DSSP's (s_L, s_U). After ``fit``, ``records`` holds each epoch's
    :class:`~ralp.ps_strategy.staleness.SyncRecord` (clocks, waiting, starts and their gaps,
    the controller's choices).
    """

    def __init__(self, sync: str | SyncPolicy = "dssp", staleness=None,
                 slow_worker: str | SlowWorker | None = None):
        super().__init__()
        self.policy = as_policy(sync, staleness)
        self.slow_worker = (
            SlowWorker.parse(slow_worker) if isinstance(slow_worker, str) else slow_worker
        )
        self.records: list[SyncRecord] = []


def call_callbacks(callbacks: Sequence, hook: str, *args) -> None:
    for cb in callbacks:
        getattr(cb, hook)(*args)
