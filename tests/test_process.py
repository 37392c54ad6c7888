"""ralp._process.process_gone against processes in each state this test makes."""

import os
import subprocess
import sys
import time

from ralp._process import process_gone


def test_a_running_process_is_not_gone():
    assert not process_gone(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not process_gone(child.pid)
    finally:
        child.kill()
        child.wait()


def test_a_zombie_is_gone_and_so_is_a_reaped_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    # not reaped: once it has exited it stays a zombie, which kill(pid, 0) still finds
    while time.monotonic() < deadline and not process_gone(child.pid):
        time.sleep(0.05)
    try:
        os.kill(child.pid, 0)  # the zombie is still there ...
        assert process_gone(child.pid)  # ... and counts as gone
    finally:
        child.wait()
    assert process_gone(child.pid)


def _python(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], **kwargs)


def test_stop_processes_ends_the_polite_at_once_and_kills_one_that_ignores_sigterm():
    from ralp._process import stop_processes

    polite = _python("import time; time.sleep(60)")
    stubborn = _python("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
                       " print('ready', flush=True); time.sleep(60)", stdout=subprocess.PIPE)
    assert stubborn.stdout.readline().strip() == b"ready"  # its handler is in place
    start = time.monotonic()
    stop_processes([polite, stubborn], grace_s=1.0)
    took = time.monotonic() - start
    assert polite.returncode == -15 and stubborn.returncode == -9
    assert took < 30  # the grace, not the children's minute
    stubborn.stdout.close()


def test_stop_processes_with_session_ends_what_the_process_started():
    from ralp._process import stop_processes

    # a shell that starts a sleeper, prints its pid and waits: SIGTERM to the shell alone
    # would leave the sleeper
    leader = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & echo $!; wait"],
                              stdout=subprocess.PIPE, start_new_session=True)
    sleeper = int(leader.stdout.readline())
    stop_processes([leader], grace_s=5.0, session=True)
    leader.stdout.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not process_gone(sleeper):
        time.sleep(0.05)
    assert process_gone(sleeper)


def test_owner_gone_is_never_this_process_nor_a_number_that_is_no_pid():
    from ralp._process import PID_MAX_LIMIT, owner_gone

    assert not owner_gone(os.getpid())
    assert not owner_gone(0)  # would name our own process group
    assert not owner_gone(PID_MAX_LIMIT + 1)  # no such pid: not a run of ours
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert owner_gone(child.pid)
