"""Training steps under a synchronization paradigm: one driver thread per worker.

ParameterServerStrategy's ``ClusterCoordinator`` hands each step to whichever worker is idle
and never holds one back: that is ASP, the trainer's default. A bounded paradigm (BSP, SSP,
DSSP; :mod:`ralp.ps_strategy.staleness`) must know which worker pushes each gradient and hold
a worker that is too far ahead, which the coordinator's shared queue cannot do. So here each
worker gets a thread in the coordinator process that runs the traced step on *that* worker
(the step function called under the worker's device, as the coordinator's own worker threads
call it) with that worker's input pipeline, reports each push to a :class:`SyncServer`, and
waits while the server holds it. Gradients still go to the PS inside the step, as before.

BSP makes one update per round: the step adds its gradients to accumulators on the PS
(:func:`ralp.ps_strategy.steps.accumulate`) and, when the server closes the round, the
coordinator applies their mean once (:func:`ralp.ps_strategy.steps.round_update`) before
releasing the workers.

With RALP, the offloaded layers run on the PS one batch at a time inside a critical section,
so every batch's tail sees every earlier update: the tail is never stale, whatever the
paradigm. The staleness bound applies to the head (the layers on the workers), whose
weights a worker reads at the start of its step. Under BSP the tail accumulates with the
head and is updated once per round too.
"""

from __future__ import annotations

import itertools
import logging
import re
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ralp._compat import SCHEDULE_WARNING
from ralp.ps_strategy.loops import EpochRun, Watchdog
from ralp.ps_strategy.staleness import SyncError, SyncPolicy, SyncServer


@dataclass(frozen=True)
class SlowWorker:
    """Heterogeneity: worker ``index`` is made slower by a delay after each of its pushes.

    ``INDEX:FACTOR`` (``factor``): it takes ``factor`` times as long per iteration, as a slower
    device would: a delay of (factor - 1) x its typical step time (:class:`Slowdown`).
    ``INDEX:+SECONDS`` (``delay_s``): a fixed delay, the same in every run, for experiments
    that compare runs.
    """

    index: int
    factor: float = 1.0
    delay_s: float | None = None

    @classmethod
    def parse(cls, text: str) -> SlowWorker:
        usage = f"slow worker {text!r}: use INDEX:FACTOR (e.g. 1:2) or INDEX:+SECONDS (1:+0.2)"
        try:
            index, amount = text.split(":")
            if amount.strip().startswith("+"):
                slow = cls(int(index), delay_s=float(amount))
            else:
                slow = cls(int(index), float(amount))
        except ValueError:
            raise SyncError(usage) from None
        if slow.index < 0 or slow.factor < 1 or (slow.delay_s is not None and slow.delay_s < 0):
            raise SyncError(f"slow worker {text!r}: the index must be >= 0, the factor >= 1 and "
                            f"the delay >= 0")
        return slow

    def describe(self) -> str:
        if self.delay_s is not None:
            return f"worker {self.index} +{self.delay_s:g} s per step"
        return f"worker {self.index} {self.factor:g}x slower"

    def __str__(self) -> str:
        if self.delay_s is not None:
            return f"{self.index}:+{self.delay_s:g}"
        return f"{self.index}:{self.factor:g}"


CALIBRATION_STEPS = 5  # the slow worker's own steps whose median fixes its delay


class Slowdown:
    """The delay after each of the slow worker's pushes.

    For its first steps the delay is (factor - 1) x the median of its step times so far
    (the very first is left out: it includes tracing). After ``CALIBRATION_STEPS`` of them
    the delay is fixed. A delay that followed every step time would compound on a shared
    CPU: the fast workers' extra iterations slow the slow worker's steps, which would then
    lengthen its delay, so its factor would depend on what the others do. A fixed delay keeps
    a worker's speed its own, as on separate machines (and as DSSP's controller assumes).
    """

    def __init__(self, factor: float = 1.0, delay_s: float | None = None):
        self.factor = factor
        self.step_times: list[float] = []
        self.fixed_s: float | None = delay_s  # given, or set once calibrated
        self.last_s: float | None = delay_s  # the delay last applied

    @classmethod
    def of(cls, slow: SlowWorker) -> Slowdown:
        return cls(slow.factor, slow.delay_s)

    def after(self, step_time: float) -> float:
        """The delay (seconds) after a step that took ``step_time``."""
        if self.fixed_s is not None:
            return self.fixed_s
        self.step_times.append(step_time)
        typical = self.step_times[1:]
        if not typical:
            return 0.0
        delay = (self.factor - 1) * statistics.median(typical)
        if len(typical) >= CALIBRATION_STEPS:
            self.fixed_s = delay
        self.last_s = delay
        return delay


def check_slow_worker(slow_worker: SlowWorker | None, workers: int) -> None:
    if slow_worker is not None and slow_worker.index >= workers:
        raise SyncError(f"slow worker {slow_worker.index} does not exist: the cluster has "
                        f"{workers} workers (0..{workers - 1})")


class _ScheduleWarningFilter(logging.Filter):
    """Drop TF's warning that a strategy method ran outside ``ClusterCoordinator.schedule``:
    the drivers dispatch the step to a chosen worker on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return SCHEDULE_WARNING not in record.getMessage()


MAX_RETRIES = 3  # ASP: steps in a row a live worker may fail from lost ones before it is an error


def _names_a_worker(error: BaseException, workers: set[int]) -> bool:
    """Whether a step's error comes from one of ``workers`` (TensorFlow names the remote task)."""
    text = str(error)
    return any(re.search(rf"/job:worker/replica:\d+/task:{k}(?!\d)", text) for k in workers)


class SyncedSteps:
    """Runs ``steps`` training steps on ``workers`` workers under ``policy``.

    ``step(iterator)`` is the traced step; ``make_iterator(worker)`` makes a worker's input
    iterator on that worker; ``worker_device(worker)`` is its device string. ``apply_round``
    (BSP) applies the accumulated gradients of ``count`` pushes. ``check_cluster`` is called
    about once a second while waiting (it raises if the cluster cannot go on).
    """

    def __init__(
        self,
        policy: SyncPolicy,
        workers: int,
        step: Callable,
        worker_device: Callable[[int], str],
        apply_round: Callable | None = None,
        slow_worker: SlowWorker | None = None,
        check_cluster: Callable[[], None] | None = None,
        step_timeout: float = 120.0,
        next_token: Callable[[], int] | None = None,
        lost_workers: Callable[[], set[int]] | None = None,
    ):
        if policy.paradigm == "bsp" and apply_round is None:
            raise SyncError("BSP needs the round update (the trainer builds it)")
        check_slow_worker(slow_worker, workers)
        self.policy = policy
        self.workers = workers
        self.step = step
        self.worker_device = worker_device
        self.apply_round = apply_round
        self.slow_worker = slow_worker
        self.check_cluster = check_cluster
        self.step_timeout = step_timeout
        self.next_token = next_token or itertools.count().__next__
        # ASP goes on without a lost worker: its driver stops, its step's token is reused by
        # the next claim (so an update the lost worker applied is not applied twice).
        self.lost_workers = lost_workers if policy.paradigm == "asp" else None
        self.gone: set[int] = set()  # lost workers (ASP): left out for the rest of the fit

    def run(self, iterators: list, steps: int,
            on_step: Callable[[Callable], None] | None = None) -> EpochRun:
        import tensorflow as tf

        server = SyncServer(self.policy, self.workers)
        lock = threading.Condition()
        permitted = [True] * self.workers
        claimed = 0
        pushes_in_round = 0
        results: list[tuple] = []
        end_times: list[float] = []
        ran_on: list[int] = []
        errors: list[BaseException] = []
        retry_tokens: list[int] = []  # claimed by a worker lost since (ASP)
        gone = self.gone
        failures = [0] * self.workers  # each driver's steps failed in a row from lost workers
        slowdown = Slowdown.of(self.slow_worker) if self.slow_worker else None
        origin = time.perf_counter()
        for w in range(self.workers):
            server.start(w, 0.0)

        def drive(w: int) -> None:
            nonlocal claimed, pushes_in_round
            device = self.worker_device(w)
            while True:
                with lock:
                    # the shared count, read live (not bound per iteration)
                    lock.wait_for(lambda: permitted[w] or claimed >= steps or errors)  # noqa: B023
                    if claimed >= steps or errors:
                        return
                    claimed += 1
                    permitted[w] = False
                    token = retry_tokens.pop() if retry_tokens else self.next_token()
                began = time.perf_counter()
                try:
                    with tf.device(device):
                        out = self.step(iterators[w], tf.constant(token, tf.int64))
                    out = tuple(v.numpy() for v in out)  # waits for the step: its push is done
                except BaseException as e:  # noqa: BLE001 - handed to the main thread
                    lost = set() if w in gone else self._lost_after_error(gone)
                    with lock:
                        gone.update(lost)
                        # ASP: a step failed by a lost worker (its own, or a call to it in
                        # flight) is claimed again, by another worker, with the same token
                        failures[w] += 1
                        survived = (self.lost_workers is not None and failures[w] <= MAX_RETRIES
                                    and (w in gone or _names_a_worker(e, gone)))
                        if survived:
                            claimed -= 1
                            retry_tokens.append(token)
                            permitted[w] = w not in gone
                        if not survived or len(gone) == self.workers:
                            errors.append(e)
                        lock.notify_all()
                    if survived and w not in gone and len(gone) < self.workers:
                        continue  # this worker is fine: it goes on
                    return
                pushed = time.perf_counter()
                failures[w] = 0
                with lock:
                    results.append(out)
                    end_times.append(pushed)
                    ran_on.append(w)
                    go = server.push(w, pushed - origin)
                    if self.policy.paradigm == "bsp":
                        pushes_in_round += 1
                        if go:  # the round is complete: one update from all its gradients
                            self.apply_round(tf.constant(pushes_in_round))
                            pushes_in_round = 0
                    for g in go:
                        permitted[g] = True
                    lock.notify_all()
                if on_step is not None:
                    on_step(lambda out=out: out)
                if slowdown is not None and w == self.slow_worker.index:
                    time.sleep(slowdown.after(pushed - began))

        tf_logger = logging.getLogger("tensorflow")
        quiet = _ScheduleWarningFilter()
        tf_logger.addFilter(quiet)
        threads = [threading.Thread(target=drive, args=(w,), daemon=True,
                                    name=f"ralp-sync-worker-{w}")
                   for w in range(self.workers) if w not in gone]
        try:
            for t in threads:
                t.start()
            self._wait(threads, lock, errors, lambda: len(results))
        finally:
            with lock:
                claimed = steps  # let every driver go home
                lock.notify_all()
            for t in threads:
                t.join(timeout=self.step_timeout)
            tf_logger.removeFilter(quiet)
        if errors:
            raise errors[0]
        if self.policy.paradigm == "bsp" and pushes_in_round:
            self.apply_round(tf.constant(pushes_in_round))  # the last, partial round
        if slowdown is not None:
            server.record.slow_delay_s = slowdown.last_s
        return EpochRun(results, end_times, ran_on, server.record)

    def _lost_after_error(self, gone: set[int]) -> set[int]:
        """Under ASP, after a step failed: the workers lost since (none outside ASP). Probed
        for up to a second: the step's error can come before a killed task's port closes,
        and a step on a live worker can fail from a lost one (its functions are registered
        on every worker)."""
        if self.lost_workers is None:
            return set()
        deadline = time.monotonic() + 1.0
        while True:
            lost = self.lost_workers() - gone
            if lost or time.monotonic() > deadline:
                return lost
            time.sleep(0.2)

    def _wait(self, threads, lock, errors, done: Callable[[], int]) -> None:
        watch = Watchdog(self.check_cluster, self.step_timeout, f" under {self.policy}")
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.05)
            with lock:
                if errors:
                    return
            watch(done())
