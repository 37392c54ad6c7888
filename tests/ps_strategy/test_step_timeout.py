"""What counts against ``ralp.Failures(step_timeout=...)`` on a real local cluster, its tasks
stopped (SIGSTOP: a hung task, whose port still accepts connections): every worker while the
first steps run, the PS later. A first step slower than the timeout (its one-time work) is
not an error; a later step stuck for the timeout is, and so is a first step stuck past its
allowance; each message names the setting.

The PS, not the workers, is what hangs later: a worker stopped just as the coordinator copies
a finished step's result from it holds the coordinator inside TensorFlow (that copy keeps
Python's GIL until the worker answers), where no watchdog runs.
"""

import os
import signal
import threading
import time

import pytest

from ralp import LocalCluster, run_in_fresh_process
from ralp.cluster.fresh_process import ChildError
from ralp.ps_strategy.loops import FIRST_STEP_FACTOR
from tests import cluster_jobs as jobs

pytestmark = pytest.mark.cluster
SETTING = r"ralp\.Failures\(step_timeout=\.\.\.\)"


class Stopper:
    """``on_progress``: stops every worker of ``cluster`` when training begins, for
    ``first_s`` seconds (None: for good), and the PS for good once ``later_step`` updates are
    done (None: never). ``later_at``: when that happened (``time.monotonic()``)."""

    def __init__(self, cluster, first_s: float | None, later_step: int | None = None):
        self.workers = [pid for task, pid in cluster.pids.items() if task.startswith("worker")]
        self.ps = [pid for task, pid in cluster.pids.items() if task.startswith("ps")]
        self.first_s, self.later_step = first_s, later_step
        self.begun_at: float | None = None
        self.later_at: float | None = None
        self.steps = 0
        self._timer: threading.Timer | None = None

    def signal(self, signum: int, pids: list[int] | None = None) -> None:
        for pid in self.workers if pids is None else pids:
            os.kill(pid, signum)

    def __call__(self, message) -> None:
        kind, n = message
        if kind == "begin" and self.begun_at is None:
            self.begun_at = time.monotonic()
            self.signal(signal.SIGSTOP)
            if self.first_s is not None:
                self._timer = threading.Timer(self.first_s, self.signal, (signal.SIGCONT,))
                self._timer.start()
        elif kind == "step":
            self.steps = max(self.steps, n)
            if self.later_step is not None and n >= self.later_step and self.later_at is None:
                self.later_at = time.monotonic()
                self.signal(signal.SIGSTOP, self.ps)

    def resume(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.signal(signal.SIGCONT, self.workers + self.ps)


@pytest.mark.parametrize("mode, sync", [("ps", None), ("ralp", "bsp")])
def test_a_slow_first_step_is_not_a_timeout_but_a_stuck_later_step_is(mode, sync):
    timeout, later = 6.0, 4
    with LocalCluster(workers=2, ps=1) as cluster:
        stopper = Stopper(cluster, first_s=1.5 * timeout, later_step=later)
        try:
            with pytest.raises(ChildError) as raised:
                run_in_fresh_process(jobs.train_reporting_progress, cluster.spec, mode, sync,
                                     timeout, 40, on_progress=stopper, timeout=300)
            failed_at = time.monotonic()
        finally:
            stopper.resume()
    message = str(raised.value)
    assert stopper.steps >= later, message  # the slow first steps were waited for
    assert "no training step finished for 6 s" in message, message
    assert f"under {sync}" in message if sync else "under" not in message
    assert raised.match(SETTING)
    assert timeout <= failed_at - stopper.later_at < timeout + 15


def test_a_stuck_first_step_fails_after_its_allowance():
    timeout = 2.0
    with LocalCluster(workers=2, ps=1) as cluster:
        stopper = Stopper(cluster, first_s=None)
        try:
            with pytest.raises(ChildError) as raised:
                run_in_fresh_process(jobs.train_reporting_progress, cluster.spec, "ps", None,
                                     timeout, 10, on_progress=stopper, timeout=300)
            failed_at = time.monotonic()
        finally:
            stopper.resume()
    allowance = FIRST_STEP_FACTOR * timeout
    assert raised.match(f"first training step of every worker did not finish within "
                        f"{allowance:.0f} s.*{SETTING}")
    assert stopper.steps == 0
    assert allowance <= failed_at - stopper.begun_at < allowance + 15


def test_every_step_is_traced_before_training_begins():
    # tracing registers functions on every worker, holding the GIL until each answers: after
    # on_train_begin, a worker hung there would hang the fit where no watchdog runs
    with LocalCluster(workers=2, ps=1) as cluster:
        for mode, sync in [("ps", None), ("ps", "asp"), ("ralp", "bsp")]:
            counts = run_in_fresh_process(jobs.step_tracings, cluster.spec, mode, sync,
                                          timeout=300)
            assert counts["begin"] >= 1 and counts["end"] == counts["begin"], (mode, sync, counts)
