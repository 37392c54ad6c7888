"""What differs by mode: the runtime the one trainer and fit loop drive.

A runtime runs a mode's updates and keeps its model's state; everything Keras-facing (data
checks, epochs, callbacks, logs, validation, checkpoint timing) is the fit loop's
(:mod:`ralp.training.fit_loop`). Three implement it: :class:`ralp.ps_strategy.runtime.
PSRuntime` (plain PS and RALP, in the coordinator), and, through
:class:`ralp.training.ranks.RankRuntime`, the Horovod, Stanza and collective runtimes (in
every rank).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from ralp.training.optimizer_state import OptimizerState


class Runtime(Protocol):
    """A mode's runtime, as the trainer, the fit loop and the stepper use it: everything they
    use is declared here (``tests/training/test_runtime_contract.py`` checks each runtime
    against it, name and parameters)."""

    mode: str  # "ps", "ralp", "horovod", "stanza" or "collective"
    model: object  # the model as it trains: the callbacks get it
    plan: object  # the placement it runs (a Plan or a StanzaPlan), or None
    profile: object  # the model's profile the plan came from, or None
    is_chief: bool  # this process prints and writes (the coordinator, or rank 0)
    size: int  # the processes that run the fit (1: a PS coordinator; every rank)
    synchronous_workers: int  # the workers one update's batch is split over
    restart_timeout: float  # seconds to wait for a lost task (0: a lost rank ends the job)
    total_steps: int  # updates this model has trained, over every fit
    step_function: object  # the traced step a worker runs, for audits of its graph

    def describe(self) -> str:
        """The runtime in a few words, for the trainer's repr."""

    def sharding(self, data):
        """How ``data``'s batches go to the workers (:class:`ralp.training.data.Sharding`)."""

    def check_data(self, data) -> None:
        """Refuse data the mode cannot split (stanza: a batch that does not split evenly)."""

    def shared_seed(self, seed: int | None) -> int:
        """``seed``, or one drawn once and shared by every process."""

    def agree(self, flag: bool) -> bool:
        """Whether any process's ``flag`` is set (a collective)."""

    def barrier(self) -> None:
        """Wait until every process gets here (a collective)."""

    def share_text(self, text: str) -> str:
        """The first process's ``text``, on every process (a collective)."""

    def reduce(self, rows: np.ndarray) -> np.ndarray:
        """Each row (an update's sums) added up over the processes (a collective)."""

    def begin(self, objective, data, sharding, seed: int, position) -> None:
        """Build the steps for ``objective`` and give each worker its data from ``position``."""

    def run(self, updates: int, *, on_begin: Callable[[int], None],
            on_update: Callable[[np.ndarray], bool], history) -> bool:
        """Run ``updates`` updates; ``on_update(sums)`` after each (True: stop). Whether it
        was stopped."""

    def recoverable(self, error: BaseException) -> bool:
        """Whether the fit can go on after ``error`` (a lost PS task, with a checkpoint)."""

    def recover(self, error: BaseException, timeout: float) -> None:
        """Wait for the lost tasks and place the model anew (a checkpoint is restored next)."""

    def steps_seen(self) -> int:
        """Updates seen finished, for a failure's record."""

    def finish(self) -> None:
        """The fit is over."""

    def checkpoint_store(self, directory, every: int | None):
        """The fit's checkpoints in ``directory``: ``save``, ``restore``, ``restored``,
        ``step_done``, ``finish``."""

    def save_checkpoint(self, path: str) -> str:
        """Save every variable and the optimizers' state; the checkpoint's path (the PS
        modes; the others refuse)."""

    def restore_checkpoint(self, path: str) -> None:
        """Restore what :meth:`save_checkpoint` wrote (the PS modes; the others refuse)."""

    def weights(self) -> list[np.ndarray]:
        """The current weights, in the model's ``get_weights()`` order (a collective)."""

    def optimizer_state(self) -> OptimizerState:
        """The optimizers' whole state, keyed by the model's trainable variables (a
        collective)."""

    def set_state(self, weights: list[np.ndarray] | None,
                  optimizer: OptimizerState | None) -> None:
        """Set the weights and the optimizers' state (in a job of ranks: the first rank's,
        on every rank; a collective)."""

    def set_learning_rate(self, value: float) -> None:
        """Every optimizer's learning rate (this process's)."""

    def sync_statistics(self) -> None:
        """Make every replica's moving statistics their mean over the replicas (a
        collective; nothing to do where the model has one copy)."""

    def optimizer_template(self, template) -> Callable:
        """A maker of optimizers like the one training."""
