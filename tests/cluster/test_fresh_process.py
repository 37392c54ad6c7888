"""Fresh processes (forked from the zygote) clean up after themselves."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ralp import run_in_fresh_process
from tests import cluster_jobs as jobs


def test_a_fresh_process_leaves_no_autograph_sources_behind():
    # A forked child leaves by os._exit, which skips AutoGraph's atexit clean-up: every run
    # used to leave hundreds of these files in the temporary directory.
    paths = run_in_fresh_process(jobs.autograph_sources, timeout=180)
    assert paths, "the child converted no function: this test would prove nothing"
    assert [p for p in paths if os.path.exists(p)] == []


LAUNCHER = """
import sys
from ralp import run_in_fresh_process
from tests import cluster_jobs as jobs
run_in_fresh_process(jobs.write_pid_and_sleep, sys.argv[1], 600)
"""


def test_a_fresh_process_ends_when_its_launcher_is_killed_outright(tmp_path):
    """SIGKILL leaves the launcher no time to stop its child: the child stops itself."""
    root = Path(__file__).resolve().parents[2]
    pid_file = tmp_path / "child.pid"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(pid_file)], cwd=root,
                                env={**os.environ, "PYTHONPATH": str(root)})
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and launcher.poll() is None, "no child started"
            time.sleep(0.2)
        child = int(pid_file.read_text())
    finally:
        launcher.kill()
        launcher.wait()
    deadline = time.monotonic() + 15
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    stopped = not alive(child)
    if not stopped:  # leave nothing running, also when this fails
        os.kill(child, signal.SIGKILL)
    assert stopped


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
