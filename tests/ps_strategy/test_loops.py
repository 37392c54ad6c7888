"""The step loops' watchdog: what counts against ``ralp.Failures(step_timeout=...)``.

The watchdog is driven here as the loops drive it (a count of finished steps, each worker's
first step noted in a :class:`WarmUp`), on the real clock with a short timeout; the same
rules on a real cluster, workers stopped in their first and in a later step:
tests/ps_strategy/test_step_timeout.py.
"""

import time

import pytest

from ralp.cluster.spec import ClusterError
from ralp.ps_strategy.loops import FIRST_STEP_FACTOR, WarmUp, Watchdog

TIMEOUT = 0.2
SETTING = r"ralp\.Failures\(step_timeout=\.\.\.\)"


def watch_for(watch: Watchdog, seconds: float, done: int, gone=frozenset()) -> None:
    """Call ``watch`` as a loop does (every 10 ms) for ``seconds``, with ``done`` steps."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        watch(done, gone)
        time.sleep(0.01)


def test_a_slow_first_step_is_not_a_timeout_but_a_stuck_later_step_is():
    warm_up = WarmUp(workers=2)
    watch = Watchdog(None, TIMEOUT, warm_up=warm_up)
    watch_for(watch, 2.5 * TIMEOUT, done=0)  # the first steps' one-time work: no error
    warm_up.note(0)
    watch_for(watch, 1.5 * TIMEOUT, done=1)  # worker 1 still in its first step
    warm_up.note(1)
    watch_for(watch, 0.5 * TIMEOUT, done=2)  # both warm; steps finish in time
    with pytest.raises(ClusterError, match=f"no training step finished for 0 s.*{SETTING}"):
        watch_for(watch, 3 * TIMEOUT, done=2)


def test_a_stuck_first_step_fails_after_its_allowance_with_the_setting_named():
    allowance = FIRST_STEP_FACTOR * TIMEOUT
    warm_up = WarmUp(workers=2)
    warm_up.note(0)  # worker 1 never finishes its first step
    watch = Watchdog(None, TIMEOUT, " under bsp", warm_up)
    began = time.monotonic()
    with pytest.raises(ClusterError) as raised:
        watch_for(watch, 3 * allowance, done=1)
    assert allowance <= time.monotonic() - began < 2 * allowance
    message = str(raised.value)
    assert "first training step of every worker did not finish" in message
    assert f"{FIRST_STEP_FACTOR} x step_timeout=0.2" in message and "under bsp" in message
    assert "ralp.Failures(step_timeout=...)" in message


def test_the_clock_of_steps_starts_when_the_last_worker_is_warm():
    """The time a worker waited for the others' first steps is not a step's."""
    warm_up = WarmUp(workers=2)
    watch = Watchdog(None, TIMEOUT, warm_up=warm_up)
    warm_up.note(0)
    watch_for(watch, 2 * TIMEOUT, done=1)
    warm_up.note(1)  # BSP: noted once the first round is applied, after its last push
    watch_for(watch, 0.8 * TIMEOUT, done=1)


def test_the_async_schedule_counts_as_many_steps_as_workers():
    warm_up = WarmUp(workers=2)
    warm_up.note()
    assert not warm_up.done()
    warm_up.note()
    assert warm_up.done()


def test_a_lost_worker_is_not_waited_for():
    warm_up = WarmUp(workers=3)
    warm_up.note(0)
    warm_up.note(2)
    assert not warm_up.done()
    assert warm_up.done(gone={1})
