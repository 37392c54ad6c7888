"""Restarting a lockstep job (Horovod's, Stanza's, the collective one) that lost a rank.

A lockstep job is a fixed set of ranks that start together, so it cannot take a new rank in
the middle: when one dies, the launcher stops the rest, and this supervisor starts the whole
job again, as Kubernetes' restart policy for an MPIJob or ``horovodrun`` in a loop would. The
job's ``fit`` (with a ``checkpoint_dir``) goes on from its newest checkpoint; the supervisor
tells it what was lost through ``RALP_RESTART_FAILURE`` (the lost task, the step the job had
reached, when the loss was seen), so that its ``history.failures`` says what was restored and
redone, and how long it took to be back where it was.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ralp.errors import InvalidArgumentError
from ralp.models.lockstep_fit import RESTART_FAILURE_ENV

T = TypeVar("T")


@dataclass
class Supervised(Generic[T]):
    """What a supervised job gave: the last run's result and each loss it was restarted
    after (``lost``: task, kind "rank", at_step, detected_at, message)."""

    result: T
    lost: list[dict] = field(default_factory=list)

    @property
    def restarts(self) -> int:
        return len(self.lost)


def supervise(run_once: Callable[[dict[str, str], Callable], T], *, max_restarts: int,
              errors: tuple[type[BaseException], ...],
              lost_task: Callable[[BaseException], str] = lambda error: "job",
              on_progress: Callable | None = None,
              on_restart: Callable[[dict], None] | None = None) -> Supervised[T]:
    """Run ``run_once(env, on_progress)`` until it returns, starting it again after each of
    ``errors`` up to ``max_restarts`` times.

    ``env`` is what the restarted job's environment must add (the failure, for its ``fit``);
    the job reports its steps as ``("step", n)`` progress messages (``n`` counted from the
    start of the training, restarts included), which are passed on to ``on_progress``.
    ``lost_task(error)`` names the task whose loss ended a run.

    Raises:
        The last of ``errors`` when the job failed more than ``max_restarts`` times.
    """
    if not isinstance(max_restarts, int) or max_restarts < 0:
        raise InvalidArgumentError(f"max_restarts must be a whole number >= 0, got {max_restarts!r}")
    lost: list[dict] = []
    env: dict[str, str] = {}
    reached = [0]

    def progress(message) -> None:
        if message[0] == "step":
            reached[0] = max(reached[0], int(message[1]))
        if on_progress is not None:
            on_progress(message)

    while True:
        try:
            return Supervised(run_once(dict(env), progress), lost)
        except errors as error:
            if len(lost) >= max_restarts:
                if lost:
                    error.add_note(f"(after {len(lost)} restart(s), max_restarts {max_restarts})")
                raise
            failure = {"task": lost_task(error), "kind": "rank", "at_step": reached[0],
                       "detected_at": time.time(), "message": str(error)[:300]}
            lost.append(failure)
            env = {RESTART_FAILURE_ENV: json.dumps(failure)}
            if on_restart is not None:
                on_restart(failure)
