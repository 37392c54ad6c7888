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

from ralp.errors import RalpError

MODES = ("ps", "ralp-h", "ralp-n", "horovod", "stanza", "collective")
HOROVOD_MODES = ("horovod", "stanza")  # run as Horovod ranks, no PS cluster
# run as workers of TensorFlow's own collectives (MultiWorkerMirroredStrategy), no PS cluster
COLLECTIVE_MODES = ("collective",)
# The modes the planner has a step-time model for (lab.planner.predict.STEP_TIME).
PREDICTED_MODES = ("ps", "ralp-h", "ralp-n", "horovod", "stanza", "collective")


class PlannerError(RalpError, ValueError):
    """A planning request that cannot be answered as asked; the message says what to change."""


def resources(mode: str, devices: int, fc_workers: int = 1) -> tuple[int, int]:
    """(workers, ps) for ``mode`` on ``devices`` devices (``fc_workers``: stanza's FC ranks)."""
    if mode not in MODES:
        raise PlannerError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if mode == "stanza":
        if devices < 2:
            raise PlannerError(f"mode 'stanza' needs at least 2 devices (a CONV rank and an FC "
                               f"rank), got {devices}")
        return devices - fc_workers, fc_workers
    if mode in ("horovod", "collective"):
        if devices < 2:
            raise PlannerError(
                f"mode {mode!r} needs at least 2 devices to allreduce, got {devices}"
            )
        return devices, 0
    if mode == "ps":
        if devices < 2 or devices % 2:
            raise PlannerError(
                f"mode 'ps' splits the devices evenly into workers and PS tasks: N must be even "
                f"and at least 2, got {devices}"
            )
        return devices // 2, devices // 2
    if devices < 2:
        raise PlannerError(
            f"mode {mode!r} needs at least 2 devices (a worker and a PS), got {devices}"
        )
    if mode == "ralp-h":
        if devices % 2:
            raise PlannerError(f"mode 'ralp-h' gives half the devices to workers and one to the "
                               f"PS: N must be even, got {devices}")
        return devices // 2, 1
    return devices - 1, 1
