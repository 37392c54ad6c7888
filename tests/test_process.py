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
