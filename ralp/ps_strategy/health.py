"""Watching a PS cluster while it trains: a lost task is recovered, an error or a warning,
never a hang.

ClusterCoordinator reruns a lost worker's steps on another worker, but with no worker left it
waits for one to come back (up to an hour), and a hung task blocks it forever. So the step
loops probe every task about once a second (:func:`ralp.cluster.probe.unreachable`):

- a lost PS is a :class:`TaskLost`: its variables are gone with it. With a checkpoint
  directory ``fit`` waits for the task to be restarted and goes on from the last checkpoint
  (:mod:`ralp.ps_strategy.recovery`); without one it is the error;
- losing every worker is an error (the variables on the PS are intact);
- a lost worker among others is a :class:`ClusterWarning` (its steps are rerun elsewhere;
  under ``sync="asp"`` its driver stops and the others go on); under a bounded paradigm
  (BSP, SSP, DSSP), whose bound is defined over every worker, it is a :class:`TaskLost`
  too: an error, or a restart from the last checkpoint once the worker is back.

A PS restarted between two probes is not seen by them; the steps then fail with errors from
``/job:ps`` (``context_id`` not found: the new server does not know this coordinator), which
:func:`is_ps_failure` recognises.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ralp._compat import WORKER_FAILED_LOG
from ralp.cluster.probe import describe, unreachable
from ralp.cluster.spec import ClusterError, ClusterSpec
from ralp.errors import warn

Task = tuple[str, int, str]  # (job, index, address)


class ClusterWarning(UserWarning):
    """Something went wrong in the cluster that training survives (a lost worker)."""


class TaskLost(ClusterError):
    """A task training cannot go on without was lost. ``tasks``: which ones."""

    def __init__(self, message: str, tasks: list[Task]):
        super().__init__(message)
        self.tasks = tasks


@dataclass
class WorkerEvent:
    """A worker seen lost (and, later, back) by the probes."""

    task: str  # "worker:1"
    lost_at: float  # time.time()
    at_step: int = 0  # steps done in the fit when it was seen lost
    back_at: float | None = None


@dataclass
class ClusterWatch:
    spec: ClusterSpec
    events: list[WorkerEvent] = field(default_factory=list)
    steps_done: Callable[[], int] = lambda: 0  # the fit's progress, for the events
    # the coordinator's last report of a step failing from a lost PS, while training: a step
    # raised with another error at the same time (an input iterator cancelled with it) is
    # that PS's failure too
    ps_failure_report: str | None = None
    _down: dict[str, WorkerEvent] = field(default_factory=dict)

    @property
    def lost_workers(self) -> list[str]:
        """Workers down at the last probe."""
        return list(self._down)

    def check(self, synchronous: bool = False) -> None:
        """Probe every task; raise if training cannot go on."""
        self.judge(unreachable(self.spec), synchronous)

    def judge(self, lost: list[Task], synchronous: bool = False) -> None:
        lost_ps = [t for t in lost if t[0] == "ps"]
        lost_workers = [t for t in lost if t[0] == "worker"]
        if lost_ps:
            raise TaskLost(f"parameter server lost during training: {describe(lost_ps)}; its "
                           "variables are gone with it. Give fit a checkpoint_dir to go on from "
                           "the last checkpoint once it is restarted", lost_ps)
        if lost_workers and len(lost_workers) == len(self.spec.workers):
            raise ClusterError(f"every worker was lost during training: {describe(lost_workers)}; "
                               "the variables on the PS are intact: save a checkpoint or restart "
                               "the workers")
        if lost_workers and synchronous:
            raise TaskLost(f"worker lost during synchronized training: {describe(lost_workers)}; "
                           "a bounded paradigm is defined over every worker and cannot go on "
                           "without it. Restart it and train with a checkpoint_dir (fit then goes "
                           "on from the last checkpoint once it is back), or train with "
                           "sync=None or 'asp', which go on without it", lost_workers)
        self._note_workers(lost_workers)

    def _note_workers(self, lost_workers: list[Task]) -> None:
        now = time.time()
        names = {f"{job}:{index}" for job, index, _ in lost_workers}
        for name in [n for n in self._down if n not in names]:
            self._down.pop(name).back_at = now
        new = [t for t in lost_workers if f"{t[0]}:{t[1]}" not in self._down]
        for job, index, _ in new:
            task = f"{job}:{index}"
            self._down[task] = self._recent(task, now) or self._event(task, now)
        if new:
            warn(f"worker lost during training: {describe(new)}; its steps are rerun on "
                 "the remaining workers", ClusterWarning)

    def _recent(self, task: str, now: float) -> WorkerEvent | None:
        """The event of ``task`` lost within SAME_FAILURE_S (the probes and the coordinator's
        log report one failure each)."""
        return next((e for e in self.events if e.task == task and now - e.lost_at < SAME_FAILURE_S),
                    None)

    def _event(self, task: str, now: float) -> WorkerEvent:
        event = WorkerEvent(task, now, self.steps_done())
        self.events.append(event)
        return event

    def note_coordinator_failure(self, index: int) -> None:
        """A worker the coordinator took for failed (its steps rerun elsewhere): recorded even
        when it was restarted before the probes saw it down."""
        now = time.time()
        if f"worker:{index}" not in self._down and self._recent(f"worker:{index}", now) is None:
            self._event(f"worker:{index}", now)

    def _note_ps_report(self, text: str) -> None:
        self.ps_failure_report = text

    @contextlib.contextmanager
    def coordinator_reports(self) -> Iterator[None]:
        """While training: the coordinator's reports of failed workers (its log) go to
        :meth:`note_coordinator_failure`."""
        self.ps_failure_report = None
        handler = _WorkerFailures(self.note_coordinator_failure, self._note_ps_report)
        logger = logging.getLogger("tensorflow")
        logger.addHandler(handler)
        try:
            yield
        finally:
            logger.removeHandler(handler)


SAME_FAILURE_S = 10.0  # reports of one worker's failure this close together are one failure
_FAILED_WORKER = re.compile(r"/job:worker/replica:\d+/task:(\d+)")


class _WorkerFailures(logging.Handler):
    def __init__(self, note: Callable[[int], None], note_ps: Callable[[str], None]):
        super().__init__(level=logging.ERROR)
        self.note, self.note_ps = note, note_ps

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg != WORKER_FAILED_LOG or len(record.args or ()) < 2:
            return
        found = _FAILED_WORKER.search(str(record.args[0]))
        # a step failing from a lost or restarted PS is reported as its worker's failure too:
        # that is the PS's failure (judged by the trainer), not the worker's
        if is_ps_failure(record.args[1]):
            self.note_ps(str(record.args[1]))
        elif found:
            self.note(int(found.group(1)))


def failed_ps_tasks(error: BaseException, spec: ClusterSpec) -> list[Task]:
    """The PS tasks a step's error names (TensorFlow names the remote task)."""
    named = {int(i) for i in re.findall(r"/job:ps/replica:\d+/task:(\d+)", str(error))}
    return [t for t in spec.tasks() if t[0] == "ps" and t[1] in named]


def is_ps_failure(error: BaseException) -> bool:
    """Whether a TensorFlow error from a step says a PS task failed or was restarted."""
    text = str(error)
    return "/job:ps" in text and any(mark in text for mark in _PS_FAILURE_MARKS)


_PS_FAILURE_MARKS = (
    "context_id",  # the restarted server does not know this coordinator's context
    "Socket closed", "Connection reset", "Connection refused", "failed to connect",
    "Unavailable", "UNAVAILABLE", "grpc_status:14",
    # a step whose tensors crossed a restarted PS (AbortedError, seen in the chaos benchmark)
    "different device incarnation", "was probably restarted",
    # a restarted PS answering a read sent to the task it replaced (InternalError, seen in
    # tests/ps_strategy/test_failures.py under the full suite's load)
    "Unable to parse request",
)
