"""Processes ralp started or watches: whether one has exited, as the kernel reports it (one
answer for every watch and sweep: a task watching its launcher, the pace probes watching
theirs, the sweeps of namespaces and control groups named for a run's pid), and stopping the
ones it started, by their ids."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence

# the largest pid Linux hands out on 64-bit hosts (PID_MAX_LIMIT, include/linux/threads.h):
# a number above it in a name is not a process of ours
PID_MAX_LIMIT = 4_194_304


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` has exited, a zombie included.

    ``kill(pid, 0)`` succeeds on a zombie, which stays one until its parent reaps it, and
    that parent may itself be waiting on something the watcher holds (pytest reads a CLI's
    pipes, which the zygote keeps open while any child of it lives): a watch on the pid
    alone can then deadlock. A pid another user owns counts as alive."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc here: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False


def owner_gone(pid: int) -> bool:
    """Whether the run that owns a resource named for its pid (a namespace, a control group, a
    directory) has ended, so that the resource is stale: never for this process, nor for a
    number that is no pid (0 would name our own process group)."""
    if pid <= 0 or pid > PID_MAX_LIMIT or pid == os.getpid():
        return False
    return process_gone(pid)


def stop_processes(processes: Sequence[subprocess.Popen], grace_s: float, *,
                   session: bool = False) -> None:
    """Stop each of ``processes`` still running: SIGTERM, then SIGKILL to those still there
    ``grace_s`` after (one deadline for all), and reap them. ``session``: signal each one's
    process group (it was started with ``start_new_session=True``), so that what it started
    goes too."""
    def send(process: subprocess.Popen, signum: int) -> None:
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if session:
                os.killpg(process.pid, signum)
            else:
                process.send_signal(signum)

    for process in processes:
        send(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        if process.poll() is None:
            send(process, signal.SIGKILL)
            process.wait()
