"""The planner's side of the mode registry (:mod:`ralp.modes`, whose table says what each
mode is and what it takes on N devices): its names of the mode sets, its error, and each
mode's resources as the planner asks for them."""

from __future__ import annotations

from ralp import modes as registry
from ralp.errors import RalpError

MODES = registry.NAMES
HOROVOD_MODES = registry.HOROVOD_MODES  # run as Horovod ranks, no PS cluster
# run as workers of TensorFlow's own collectives (MultiWorkerMirroredStrategy), no PS cluster
COLLECTIVE_MODES = registry.COLLECTIVE_MODES
# The modes the planner has a step-time model for (lab.planner.predict.STEP_TIME).
PREDICTED_MODES = registry.PREDICTED


class PlannerError(RalpError, ValueError):
    """A planning request that cannot be answered as asked; the message says what to change."""


def resources(mode: str, devices: int, fc_workers: int = 1) -> tuple[int, int]:
    """(workers, ps) for ``mode`` on ``devices`` devices (``fc_workers``: stanza's FC ranks)."""
    if mode not in MODES:
        raise PlannerError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    try:
        return registry.MODES[mode].resources(devices, fc_workers)
    except registry.ResourceError as e:
        raise PlannerError(str(e)) from None
