"""Whether a process has exited, as the kernel reports it: one answer for every watch and
sweep in ralp (a task watching its launcher, the pace probes watching theirs, the sweeps of
namespaces and control groups named for a run's pid)."""

from __future__ import annotations

import os

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
