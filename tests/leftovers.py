"""What a run may leave behind, for the tests that stop one: its processes, its network
namespaces and its control groups, all named for the id of the process that launched it."""

from __future__ import annotations

import os
import subprocess
import time

from ralp.emulation.cpu_meter import find_hierarchy

HIERARCHY, _ = find_hierarchy()


def groups_left(pid: int) -> list[str]:
    """Control groups of the run launched by process ``pid`` still present."""
    if HIERARCHY is None:
        return []
    return [name for root in HIERARCHY.roots for name in os.listdir(root)
            if name.startswith(_prefixes(pid))]


def _prefixes(pid: int) -> tuple[str, ...]:
    # a PS-mode run's names, a Horovod run's and a collective run's (not those of another pid
    # whose digits start with this one's)
    return f"rlp{pid}-", f"rlp{pid}h", f"rlp{pid}c"


def assert_nothing_left(pid: int, started: list, grace_s: float = 15.0) -> None:
    """Every process in ``started`` (psutil processes) ends within ``grace_s``, and no network
    namespace or control group of the run launched by ``pid`` is left."""
    deadline = time.monotonic() + grace_s
    while any(q.is_running() and q.status() != "zombie" for q in started):
        assert time.monotonic() < deadline, [q.pid for q in started if q.is_running()]
        time.sleep(0.2)
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [name for name in listing.split() if name.startswith(_prefixes(pid))], listing
    assert groups_left(pid) == []
