"""Running an epoch's steps under ParameterServerStrategy's own schedule (:class:`AsyncSteps`).

Its synchronized sibling is :class:`ralp.ps_strategy.sync.SyncedSteps`; both have the same
shape: built with the traced step, a source of step tokens and the cluster's health check,
``run(inputs, steps, on_step)`` returns an :class:`EpochRun`; ``on_step(fetch)`` is called in
the calling thread as each step is seen finished, ``fetch()`` giving its result; when it
returns True no further step starts (those already started finish). Every step is called with a
token of its own (:class:`ralp.ps_strategy.steps.StepLedger`: a rerun of an applied step
changes nothing).

Both watch the cluster while the steps run (:class:`Watchdog`). No progress is a
:class:`~ralp.cluster.spec.ClusterError` that names ``ralp.Failures(step_timeout=...)``: no
step finished for ``step_timeout`` seconds, or, until every worker has finished its first
step (which does one-time work: :class:`WarmUp`), ``FIRST_STEP_FACTOR`` times as long since
the steps began.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ralp._compat import remote_value_done
from ralp._compat.coordinator import every_worker_done, trace_as_scheduled
from ralp.cluster.spec import ClusterError
from ralp.ps_strategy.staleness import SyncRecord

IN_FLIGHT_PER_WORKER = 8  # steps queued ahead per worker while the loop watches the cluster


@dataclass
class EpochRun:
    results: list[tuple]  # per step: (sums, applied) as numpy
    end_times: list[float]  # time.perf_counter() when each step was seen finished
    workers: list[int] = field(default_factory=list)  # which worker ran each step, if known
    record: SyncRecord | None = None  # under a synchronization paradigm


FIRST_STEP_FACTOR = 5  # the first step of every worker may take this many step timeouts
SETTING = "ralp.Failures(step_timeout=...)"  # what a user changes, named by every message


@dataclass
class WarmUp:
    """Which workers have finished a step of the current step functions (made again when
    they are traced again, or placed on a reconnected cluster).

    A worker's first step does one-time work besides the step: the coordinator traces the
    step; the worker receives its graph and its data, optimizes the graph (TensorFlow's
    grappler) and runs it a first time. That takes far longer than a step, the longer the
    larger the network, so until every worker has finished a step the watchdog allows
    ``FIRST_STEP_FACTOR`` step timeouts instead of one. ParameterServerStrategy's own
    schedule does not say which worker ran a step: there, as many steps as workers
    (``steps``) count as every worker's first."""

    workers: int
    warm: set[int] = field(default_factory=set)  # workers known to have finished a step
    steps: int = 0  # steps finished on workers not known

    def note(self, worker: int | None = None) -> None:
        if worker is None:
            self.steps += 1
        else:
            self.warm.add(worker)

    def done(self, gone: set[int] | frozenset = frozenset()) -> bool:
        """Whether every worker (but those ``gone``) has finished a step."""
        return self.steps >= self.workers or not set(range(self.workers)) - gone - self.warm


class Watchdog:
    """Called while an epoch's steps run: probes the cluster about once a second, and raises
    when training makes no progress: before every worker has finished its first step
    (``warm_up``), when that has taken ``FIRST_STEP_FACTOR`` x ``step_timeout`` seconds
    since the run began; after, when no step has finished for ``step_timeout`` seconds (a
    hung or far too slow task)."""

    def __init__(self, check_cluster: Callable[[], None] | None, step_timeout: float,
                 what: str = "", warm_up: WarmUp | None = None):
        self.check_cluster = check_cluster
        self.step_timeout = step_timeout
        self.first_step_timeout = FIRST_STEP_FACTOR * step_timeout
        self.what = what  # e.g. " under ssp:3"
        self.warm_up = warm_up
        self._done, self._began, self._probe = 0, time.monotonic(), 0.0
        self._progress = self._began
        self._warm_since: float | None = None

    def __call__(self, done: int, gone: set[int] | frozenset = frozenset()) -> None:
        now = time.monotonic()
        if done != self._done:
            self._done, self._progress = done, now
        if self.check_cluster is not None and now - self._probe > 1.0:
            self._probe = now
            self.check_cluster()
        if self.warm_up is not None and not self.warm_up.done(gone):
            if now - self._began > self.first_step_timeout:
                raise ClusterError(self._first_step_message())
            return
        if self._warm_since is None:
            self._warm_since = now
        if now - max(self._progress, self._warm_since) > self.step_timeout:
            raise ClusterError(
                f"no training step finished for {self.step_timeout:.0f} s{self.what}: a task "
                f"of the cluster is hung or far too slow (if steps take this long, raise "
                f"{SETTING})")

    def _first_step_message(self) -> str:
        return (f"the first training step of every worker did not finish within "
                f"{self.first_step_timeout:.0f} s{self.what} ({FIRST_STEP_FACTOR} x "
                f"step_timeout={self.step_timeout:g}: it includes tracing the step, sending "
                "its graph and data to the workers and their graph optimization): a task of "
                f"the cluster is hung or far too slow (if it is only slow, raise {SETTING})")


class AsyncSteps:
    """ParameterServerStrategy's asynchronous schedule: any idle worker takes the next step.

    At most ``IN_FLIGHT_PER_WORKER`` steps per worker are queued ahead, so the loop keeps
    watching the cluster instead of blocking in ``schedule`` (whose queue is bounded):
    ``check_cluster`` runs about once a second and raises if training cannot go on, and no
    progress is an error too (:class:`Watchdog`; ``warm_up`` is kept by the caller across
    epochs).
    """

    def __init__(
        self,
        coordinator,
        step: Callable,
        workers: int,
        check_cluster: Callable[[], None] | None = None,
        step_timeout: float = 120.0,
        next_token: Callable[[], int] | None = None,
        warm_up: WarmUp | None = None,
    ):
        self.coordinator = coordinator
        self.step = step
        self.next_token = next_token or itertools.count().__next__
        self.workers = workers
        self.check_cluster = check_cluster
        self.step_timeout = step_timeout
        self.warm_up = warm_up or WarmUp(workers)

    def run(self, iterator, steps: int, on_step: Callable[[Callable], None] | None = None) -> EpochRun:
        import tensorflow as tf

        window = IN_FLIGHT_PER_WORKER * self.workers
        remotes: list = []
        end_times: list[float] = []
        done = 0
        watch = Watchdog(self.check_cluster, self.step_timeout, warm_up=self.warm_up)
        self._wait_for_iterators(iterator, watch)
        while True:
            while len(remotes) < steps and len(remotes) - done < window:
                token = tf.constant(self.next_token(), tf.int64)
                remotes.append(self.coordinator.schedule(self.step, args=(iterator, token)))
            while done < len(remotes) and remote_value_done(remotes[done]):
                done += 1
                self.warm_up.note()
                end_times.append(time.perf_counter())
                if on_step is not None and on_step(remotes[done - 1].fetch):
                    steps = len(remotes)  # stop: the steps already scheduled finish
            if done == steps:
                break
            watch(done)
            time.sleep(0.01)
        self.coordinator.join()  # raises the first step error, if any
        results = [tuple(np.asarray(v) for v in r.fetch()) for r in remotes]
        return EpochRun(results, end_times)

    def trace(self, iterator) -> None:
        """Trace the step for ``iterator`` as ``schedule`` will, before training begins: a
        worker hung while a function is traced hangs this process (see
        :func:`~ralp._compat.coordinator.trace_as_scheduled`), one hung later a step."""
        import tensorflow as tf

        trace_as_scheduled(self.coordinator, self.step, (iterator, tf.constant(0, tf.int64)))

    @staticmethod
    def _wait_for_iterators(iterator, watch: Watchdog) -> None:
        """Watch until every worker has made its iterator (its dataset sent to it), before the
        step is traced: tracing while a worker hangs in making it wedges this process inside
        TensorFlow (registering a function waits for that worker, holding Python's GIL), where
        no watchdog runs."""
        while not every_worker_done(iterator):
            watch(0)
            time.sleep(0.01)

