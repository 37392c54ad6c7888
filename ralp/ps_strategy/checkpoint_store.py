"""The parameter-server runtime's checkpoints: TensorFlow's, read and written by the
coordinator from every task (the offloaded layers and their optimizer slots on their PS task
included), with ralp's state file beside each (:mod:`ralp.training.checkpoints`).

The fit loop saves between updates only (the steps in flight finish first), so no step is
half-applied in a checkpoint. A save racing a task's loss is tried again once; a PS lost
while its variables are read skips the save (the next steps find it lost and go on from the
previous checkpoint).
"""

from __future__ import annotations

import time

import tensorflow as tf

from ralp.ps_strategy.health import is_ps_failure
from ralp.training.checkpoints import (
    Checkpointer,
    CheckpointError,
    TrainingState,
    describe_mismatch,
    fingerprint,
    read_checkpoint,
)

SAVE_ATTEMPTS = 2


class PSCheckpoints:
    """The checkpoints of one ``fit`` of a :class:`~ralp.ps_strategy.runtime.PSRuntime` in
    ``directory``, every ``every`` updates."""

    def __init__(self, runtime, directory, every: int | None):
        self.runtime = runtime
        self.checkpointer = Checkpointer(directory, every)
        self.directory, self.every = self.checkpointer.directory, every

    def _fingerprint(self) -> dict:
        r = self.runtime
        return fingerprint(r.model, r.optimizers, r.mode)

    def save(self, state: TrainingState) -> None:
        state.fingerprint = self._fingerprint()
        for attempt in range(SAVE_ATTEMPTS):
            try:
                self.checkpointer.save(self.runtime.checkpoint, state)
                return
            except tf.errors.OpError as e:
                if is_ps_failure(e):
                    return
                if attempt + 1 == SAVE_ATTEMPTS:
                    raise
                time.sleep(1.0)  # a save racing a worker's death can fail once; it is idempotent

    def restore(self) -> TrainingState | None:
        """The newest checkpoint's state, its variables restored; None when there is none."""
        found = self.checkpointer.latest(self.runtime.checkpoint)
        if found is None:
            return None
        prefix, state = found
        current = self._fingerprint()
        if state.fingerprint != current:
            raise CheckpointError(f"the checkpoint in {self.directory} was written for "
                                  f"{describe_mismatch(state.fingerprint, current)}; use another "
                                  "checkpoint_dir for this model")
        read_checkpoint(self.runtime.checkpoint, prefix)
        self.runtime.total_steps = state.total_steps
        return state

    def restored(self, state: TrainingState, history) -> None:
        pass

    def step_done(self, done: int) -> None:
        pass

    def finish(self) -> None:
        pass
