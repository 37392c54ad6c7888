"""Running an epoch's steps under ParameterServerStrategy's own schedule (:class:`AsyncSteps`).

Its synchronized sibling is :class:`ralp.ps_strategy.sync.SyncedSteps`; both have the same
shape: built with the traced step, a source of step tokens and the cluster's health check,
``run(inputs, steps, on_step)`` returns an :class:`EpochRun`; ``on_step(fetch)`` is called in
the calling thread as each step is seen finished, ``fetch()`` giving its result; when it
returns True no further step starts (those already started finish). Every step is called with a
token of its own (:class:`ralp.ps_strategy.steps.StepLedger`: a rerun of an applied step
changes nothing).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ralp._compat import remote_value_done
from ralp.cluster.spec import ClusterError
from ralp.ps_strategy.staleness import SyncRecord

IN_FLIGHT_PER_WORKER = 8  # steps queued ahead per worker while the loop watches the cluster


@dataclass
class EpochRun:
    results: list[tuple]  # per step: (sums, applied) as numpy
    end_times: list[float]  # time.perf_counter() when each step was seen finished
    workers: list[int] = field(default_factory=list)  # which worker ran each step, if known
    record: SyncRecord | None = None  # under a synchronization paradigm


class Watchdog:
    """Called while an epoch's steps run: probes the cluster about once a second, and raises
    when no step has finished for ``step_timeout`` seconds (a hung or far too slow task)."""

    def __init__(self, check_cluster: Callable[[], None] | None, step_timeout: float,
                 what: str = ""):
        self.check_cluster = check_cluster
        self.step_timeout = step_timeout
        self.what = what  # e.g. " under ssp:3"
        self._done, self._progress, self._probe = 0, time.monotonic(), 0.0

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if done != self._done:
            self._done, self._progress = done, now
        if self.check_cluster is not None and now - self._probe > 1.0:
            self._probe = now
            self.check_cluster()
        if now - self._progress > self.step_timeout:
            raise ClusterError(
                f"no training step finished for {self.step_timeout:.0f} s{self.what}: a task "
                "of the cluster is hung or far too slow (see Trainer step_timeout)"
            )


class AsyncSteps:
    """ParameterServerStrategy's asynchronous schedule: any idle worker takes the next step.

    At most ``IN_FLIGHT_PER_WORKER`` steps per worker are queued ahead, so the loop keeps
    watching the cluster instead of blocking in ``schedule`` (whose queue is bounded):
    ``check_cluster`` runs about once a second and raises if training cannot go on, and no
    finished step for ``step_timeout`` seconds is an error too.
    """

    def __init__(
        self,
        coordinator,
        step: Callable,
        workers: int,
        check_cluster: Callable[[], None] | None = None,
        step_timeout: float = 120.0,
        next_token: Callable[[], int] | None = None,
    ):
        self.coordinator = coordinator
        self.step = step
        self.next_token = next_token or itertools.count().__next__
        self.workers = workers
        self.check_cluster = check_cluster
        self.step_timeout = step_timeout

    def run(self, iterator, steps: int, on_step: Callable[[Callable], None] | None = None) -> EpochRun:
        import tensorflow as tf

        window = IN_FLIGHT_PER_WORKER * self.workers
        remotes: list = []
        end_times: list[float] = []
        done = 0
        watch = Watchdog(self.check_cluster, self.step_timeout)
        while True:
            while len(remotes) < steps and len(remotes) - done < window:
                token = tf.constant(self.next_token(), tf.int64)
                remotes.append(self.coordinator.schedule(self.step, args=(iterator, token)))
            while done < len(remotes) and remote_value_done(remotes[done]):
                done += 1
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
