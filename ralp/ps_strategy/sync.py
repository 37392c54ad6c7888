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
from ralp.ps_strategy.loops import EpochRun, WarmUp, Watchdog
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
    (BSP) applies the round's accumulated gradients. ``check_cluster`` is called
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
        warm_up: WarmUp | None = None,
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
        # which workers have finished a step (under BSP: a step and the round's update), kept
        # by the caller across epochs: until then the watchdog allows for one-time work
        self.warm_up = warm_up or WarmUp(workers)

    def trace(self, iterators: list) -> None:
        """Trace the step on each worker's device, and BSP's round update, before training
        begins: tracing registers each new function on every worker, holding Python's GIL
        until each answers, so a worker hung then hangs this process; hung later, a step."""
        import tensorflow as tf

        token = tf.constant(0, tf.int64)
        for w, iterator in enumerate(iterators):
            with tf.device(self.worker_device(w)):
                self.step.get_concrete_function(iterator, token)
        if self.apply_round is not None:
            self.apply_round.get_concrete_function()

    def run(self, iterators: list, steps: int,
            on_step: Callable[[Callable], None] | None = None) -> EpochRun:

        epoch = _Epoch(self, iterators, steps, on_step)
        tf_logger = logging.getLogger("tensorflow")
        quiet = _ScheduleWarningFilter()
        tf_logger.addFilter(quiet)
        threads = [threading.Thread(target=epoch.drive, args=(w,), daemon=True,
                                    name=f"ralp-sync-worker-{w}")
                   for w in range(self.workers) if w not in self.gone]
        watched = False
        try:
            for t in threads:
                t.start()
            self._wait(threads, epoch)
            watched = True
        finally:
            # a driver may hold the lock inside a call to a hung task (BSP's round update): the
            # watchdog's error then goes on without it, and without waiting for it
            if epoch.lock.acquire(timeout=1.0):
                epoch.claimed = steps  # let every driver go home
                epoch.lock.notify_all()
                epoch.lock.release()
            for t in threads:
                t.join(timeout=self.step_timeout if watched else 1.0)
            tf_logger.removeFilter(quiet)
        if epoch.errors:
            raise epoch.errors[0]
        if self.policy.paradigm == "bsp" and epoch.pushes_in_round:
            self.apply_round()  # the last, partial round
        if epoch.slowdown is not None:
            epoch.server.record.slow_delay_s = epoch.slowdown.last_s
        return EpochRun(epoch.results, epoch.end_times, epoch.ran_on, epoch.server.record)

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

    def _wait(self, threads, epoch: _Epoch) -> None:
        """Watch the drivers until they are done; hand each finished step, in the order the
        steps were pushed (BSP: round by round), to ``on_step`` in this thread."""
        watch = Watchdog(self.check_cluster, self.step_timeout, f" under {self.policy}",
                         self.warm_up)
        reported = 0
        while True:
            alive = any(t.is_alive() for t in threads)
            for t in threads:
                t.join(timeout=0.05)
            new = []
            # not blocked by a driver holding the lock in a call to a hung task: watched
            if epoch.lock.acquire(timeout=0.05):
                try:
                    if epoch.errors:
                        return
                    new = epoch.results[reported:]
                finally:
                    epoch.lock.release()
            for out in new:
                reported += 1
                if epoch.on_step is not None and epoch.on_step(lambda out=out: out):
                    with epoch.lock:  # stop: the steps already claimed finish (BSP: the round)
                        W = self.workers if self.policy.paradigm == "bsp" else 1
                        epoch.steps = min(epoch.steps, -(-epoch.claimed // W) * W)
                        epoch.lock.notify_all()
            if not alive and reported == len(epoch.results):
                return
            watch(reported, self.gone)


class _Epoch:
    """One :meth:`SyncedSteps.run`: the state its driver threads share (under ``lock``) and
    what each driver does (:meth:`drive`): claim a step when the server permits, run it on its
    worker, report the push; under ASP a step failed by a lost worker is claimed again."""

    def __init__(self, steps_of: SyncedSteps, iterators: list, steps: int,
                 on_step: Callable[[Callable], None] | None) -> None:
        self.of, self.iterators, self.steps, self.on_step = steps_of, iterators, steps, on_step
        workers = steps_of.workers
        self.server = SyncServer(steps_of.policy, workers)
        self.lock = threading.Condition()
        self.permitted = [True] * workers
        self.claimed = 0
        self.pushes_in_round = 0
        self.results: list[tuple] = []
        self.end_times: list[float] = []
        self.ran_on: list[int] = []
        self.errors: list[BaseException] = []
        self.retry_tokens: list[int] = []  # claimed by a worker lost since (ASP)
        self.failures = [0] * workers  # each driver's steps failed in a row from lost workers
        slow = steps_of.slow_worker
        self.slowdown = Slowdown.of(slow) if slow else None
        self.origin = time.perf_counter()
        for w in range(workers):
            self.server.start(w, 0.0)

    def drive(self, w: int) -> None:
        import tensorflow as tf

        device = self.of.worker_device(w)
        while True:
            token = self._claim(w)
            if token is None:
                return
            began = time.perf_counter()
            try:
                with tf.device(device):
                    out = self.of.step(self.iterators[w], tf.constant(token, tf.int64))
                out = tuple(v.numpy() for v in out)  # waits for the step: its push is done
            except BaseException as e:  # noqa: BLE001 - handed to the main thread
                if self._failed(w, token, e):
                    continue  # this worker is fine: it goes on
                return
            pushed = time.perf_counter()
            try:
                self._pushed(w, out, pushed)
            except BaseException as e:  # noqa: BLE001 - BSP's round update: the epoch's error
                with self.lock:
                    self.errors.append(e)
                    self.lock.notify_all()
                return
            slow = self.of.slow_worker
            if self.slowdown is not None and w == slow.index:
                time.sleep(self.slowdown.after(pushed - began))

    def _claim(self, w: int) -> int | None:
        """Wait until worker ``w`` may run a step; its token, or None when the epoch is over."""
        with self.lock:
            self.lock.wait_for(lambda: self.permitted[w] or self.claimed >= self.steps
                               or self.errors)
            if self.claimed >= self.steps or self.errors:
                return None
            self.claimed += 1
            self.permitted[w] = False
            return self.retry_tokens.pop() if self.retry_tokens else self.of.next_token()

    def _failed(self, w: int, token: int, error: BaseException) -> bool:
        """After worker ``w``'s step failed: whether its driver goes on. ASP: a step failed by
        a lost worker (its own, or a call to it in flight) is claimed again, by another worker,
        with the same token; anything else is the epoch's error."""
        gone = self.of.gone
        lost = set() if w in gone else self.of._lost_after_error(gone)
        with self.lock:
            gone.update(lost)
            self.failures[w] += 1
            survived = (self.of.lost_workers is not None and self.failures[w] <= MAX_RETRIES
                        and (w in gone or _names_a_worker(error, gone)))
            if survived:
                self.claimed -= 1
                self.retry_tokens.append(token)
                self.permitted[w] = w not in gone
            if not survived or len(gone) == self.of.workers:
                self.errors.append(error)
            self.lock.notify_all()
        return survived and w not in gone and len(gone) < self.of.workers

    def _pushed(self, w: int, out: tuple, pushed: float) -> None:
        """Worker ``w``'s step is done: record it, report the push, release whom it frees
        (BSP: a complete round is applied first, one update from all its gradients)."""

        self.failures[w] = 0
        with self.lock:
            self.results.append(out)
            self.end_times.append(pushed)
            self.ran_on.append(w)
            go = self.server.push(w, pushed - self.origin)
            if self.of.policy.paradigm == "bsp":
                self.pushes_in_round += 1
                if go:
                    self.of.apply_round()  # its first call is one-time work too
                    self.pushes_in_round = 0
                    for g in go:
                        self.of.warm_up.note(g)
            else:
                self.of.warm_up.note(w)
            for g in go:
                self.permitted[g] = True
            self.lock.notify_all()
