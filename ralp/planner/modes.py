"""The modes the runtime offers and the resources each takes on N devices (RALP's
configurations, Park et al. 2019).

=========  =============  ======================================================
mode       workers + PS   why
=========  =============  ======================================================
ps         N/2 + N/2      plain ParameterServerStrategy, common practice
ralp-h     N/2 + 1        RALP with half the devices as workers: saves resources
ralp-n     N-1 + 1        RALP with every device but one as a worker: most speed
horovod    N + 0          Horovod ring allreduce (Gloo): every device a worker
stanza     N-F + F        layer separation (Stanza) on Horovod: N-F CONV ranks
                          allreduce the head, F FC ranks (default 1) hold the tail
=========  =============  ======================================================

In a ``stanza`` job, ``workers`` counts the CONV ranks and ``ps`` the FC ranks.
"""

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
