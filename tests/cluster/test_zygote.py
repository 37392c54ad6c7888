"""ralp.cluster.zygote: starting a process with interrupts held until its id is known."""

import multiprocessing
import os
import signal
import time

import pytest

from ralp.cluster.zygote import start_process

FORK = multiprocessing.get_context("fork")  # a tiny child: no zygote needed to test the hold


class InterruptedWhileStarting(FORK.Process):
    """A process whose start is interrupted (a Ctrl-C lands) before it forks."""

    def start(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the Python handler runs here, between bytecodes, if not held
        super().start()


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """Ctrl-C as in a terminal (a run started in the background inherits SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_interrupt_during_start_is_raised_once_the_pid_is_known():
    process = InterruptedWhileStarting(target=time.sleep, args=(60,), daemon=True)
    try:
        with pytest.raises(KeyboardInterrupt):
            start_process(process)
        assert process.pid is not None and process.is_alive()  # started, and known to stop
    finally:
        if process.pid is not None:
            process.kill()
            process.join()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_without_the_hold_the_same_interrupt_leaves_no_pid():
    """The reference: a plain start() is interrupted before it knows its child."""
    process = InterruptedWhileStarting(target=time.sleep, args=(60,), daemon=True)
    with pytest.raises(KeyboardInterrupt):
        process.start()
    assert process.pid is None


def test_a_start_without_interrupt_leaves_the_handlers_as_they_were():
    process = FORK.Process(target=time.sleep, args=(0,), daemon=True)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    start_process(process)
    process.join()
    assert process.exitcode == 0
    assert {s: signal.getsignal(s) for s in before} == before
