"""The CPU controller's files: where a machine's cgroup CPU controller lives
(:class:`Hierarchy`), and the counters a run reads from its devices' groups and the host
(:class:`DeviceMeter`), with a device watcher's counter files
(:mod:`ralp.emulation.counter_files`). Nothing here imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ralp.emulation.counter_files import Counters, read_counters

CGROUP_ROOT_ENV = "RALP_CGROUP_ROOT"  # where the cgroup file systems are mounted
DEFAULT_CGROUP_ROOT = "/sys/fs/cgroup"

@dataclass(frozen=True)
class Hierarchy:
    """Where this machine's CPU controller lives: ``limit`` holds the groups whose bandwidth
    is set, ``usage`` those whose CPU time is read (the same directory on cgroup v2, and on v1
    when ``cpu`` and ``cpuacct`` are mounted together)."""

    version: int  # 1 or 2
    limit: str
    usage: str

    @property
    def roots(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.limit, self.usage)))


def find_hierarchy(root: str | None = None) -> tuple[Hierarchy | None, str | None]:
    """The CPU controller under ``root`` (default ``$RALP_CGROUP_ROOT`` or /sys/fs/cgroup) if
    this process can make groups there, else (None, what is missing)."""
    root = root or os.environ.get(CGROUP_ROOT_ENV) or DEFAULT_CGROUP_ROOT
    found = _v1(root) or _v2(root)
    if found is None:
        return None, f"no cgroup cpu controller under {root} (cgroup v1 cpu or v2 cpu.max)"
    probe = f"rlp{os.getpid()}-probe"
    try:
        for directory in found.roots:
            os.mkdir(os.path.join(directory, probe))
    except OSError as e:
        return None, f"cannot create a control group in {directory}: {e.strerror}"
    finally:
        for directory in found.roots:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(directory, probe))
    return found, None


def _v1(root: str) -> Hierarchy | None:
    limit = next((os.path.join(root, d) for d in ("cpu", "cpu,cpuacct")
                  if os.path.exists(os.path.join(root, d, "cpu.cfs_quota_us"))), None)
    if limit is None:
        return None
    if os.path.exists(os.path.join(limit, "cpuacct.usage")):
        return Hierarchy(1, limit, limit)
    usage = os.path.join(root, "cpuacct")
    return Hierarchy(1, limit, usage) if os.path.exists(os.path.join(usage, "cpuacct.usage")) else None


def _v2(root: str) -> Hierarchy | None:
    for directory in (root, os.path.join(root, "unified")):
        try:
            with open(os.path.join(directory, "cgroup.controllers")) as f:
                if "cpu" in f.read().split():
                    return Hierarchy(2, directory, directory)
        except OSError:
            continue
    return None


@dataclass(frozen=True)
class CpuReading:
    """A group's counters: CPU seconds used, CFS periods and throttled periods so far."""

    used_s: float
    periods: int
    throttled: int


@dataclass(frozen=True)
class CpuSnapshot:
    """Every group's counters, the host's busy and stolen CPU seconds and a device watcher's
    counters, one entry per counter file (None where one could not be read; empty without a
    watcher), at one moment."""

    time: float  # time.monotonic()
    host_busy_s: float
    host_steal_s: float
    tasks: Mapping[str, CpuReading]
    watch: tuple[Counters | None, ...] = ()

    def to_dict(self) -> dict:
        """Plain JSON (a Horovod rank sends its snapshots as a message)."""
        tasks = {task: [r.used_s, r.periods, r.throttled] for task, r in self.tasks.items()}
        return {"time": self.time, "host_busy_s": self.host_busy_s,
                "host_steal_s": self.host_steal_s, "tasks": tasks,
                "watch": [None if c is None else list(c) for c in self.watch]}

    @classmethod
    def from_dict(cls, d: Mapping) -> CpuSnapshot:
        tasks = {task: CpuReading(*values) for task, values in d["tasks"].items()}
        watch = tuple(None if c is None else tuple(c) for c in d.get("watch") or ())
        return cls(d["time"], d["host_busy_s"], d["host_steal_s"], tasks, watch)


@dataclass(frozen=True)
class DeviceMeter:
    """Reads the CPU counters of a run's groups, keyed by task, and its device watcher's
    counter files (picklable: the job that knows its measured window reads them itself, as it
    reads the link counters)."""

    hierarchy: Hierarchy
    groups: tuple[tuple[str, str], ...]  # (task, group directory name under the hierarchy)
    watch_files: tuple[str, ...] = ()  # a device watcher's (ralp.emulation.counter_files)

    def __call__(self) -> CpuSnapshot:
        tasks = {task: read_group(self.hierarchy, name) for task, name in self.groups}
        busy, steal = host_cpu_seconds()
        watch = tuple(read_counters(path) for path in self.watch_files)
        return CpuSnapshot(time.monotonic(), busy, steal, tasks, watch)

    def to_json(self) -> str:
        import json

        h = self.hierarchy
        return json.dumps({"hierarchy": [h.version, h.limit, h.usage],
                           "groups": [list(g) for g in self.groups],
                           "watch_files": list(self.watch_files)})

    @classmethod
    def from_json(cls, text: str) -> DeviceMeter:
        import json

        d = json.loads(text)
        return cls(Hierarchy(*d["hierarchy"]), tuple(tuple(g) for g in d["groups"]),
                   tuple(d.get("watch_files", ())))


def read_group(hierarchy: Hierarchy, name: str) -> CpuReading:
    """One group's counters (a group that is gone reads as zeros)."""
    try:
        stat = _keyed(os.path.join(hierarchy.limit, name, "cpu.stat"))
        if hierarchy.version == 2:
            used = stat.get("usage_usec", 0) / 1e6
        else:
            with open(os.path.join(hierarchy.usage, name, "cpuacct.usage")) as f:
                used = int(f.read()) / 1e9
    except OSError:
        return CpuReading(0.0, 0, 0)
    return CpuReading(used, stat.get("nr_periods", 0), stat.get("nr_throttled", 0))


def _keyed(path: str) -> dict[str, int]:
    with open(path) as f:
        return {k: int(v) for k, v in (line.split()[:2] for line in f if line.strip())}


def host_cpu_seconds() -> tuple[float, float]:
    """(busy, stolen) CPU seconds of the whole host so far, from /proc/stat: busy is user,
    nice, system, irq and softirq time; stolen is what the hypervisor gave to other guests."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick
