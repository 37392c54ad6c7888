"""Simulated devices: one control group per device, with a CPU bandwidth limit of its own.

A real cluster gives every task its own device; on one machine the tasks share its cores, and
a task that waits lends its CPU to the others (a RALP PS would borrow the waiting workers' CPU
for the offloaded layers, which no real PS machine can do). So every task of a simulated
cluster runs in a control group of its own whose CFS bandwidth limit is the device's budget,
as Mininet-HiFi's CPU-limited hosts do (N. Handigol et al., "Reproducible Network Experiments
Using Container-Based Emulation", CoNEXT 2012, section 3). The period is short (10 ms, against
the kernel's 100 ms default) so that throttling does not add its own step-time jitter.

- cgroup v1: the ``cpu`` hierarchy sets the limit (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``)
  and counts throttled periods (``cpu.stat``); the ``cpuacct`` hierarchy counts the CPU time
  used (``cpuacct.usage``), both mounted apart or together.
- cgroup v2: ``cpu.max`` sets the limit; ``cpu.stat`` counts both.

A task joins its group itself (:meth:`DeviceGroup.join`), first thing after the process that
starts it hands it over, so nothing of the job runs outside the budget. Groups are named for
the run (``rlp<launcher pid>...``, as the network namespaces are), removed when it ends, and
swept by the next run if the launcher was killed outright. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ralp._process import owner_gone
from ralp.emulation.cpu_meter import DeviceMeter, Hierarchy
from ralp.emulation.watchers import DeviceWatcher
from ralp.errors import ClusterError

PERIOD_US = 10_000  # CFS period: short, so a throttled task waits at most a few ms
MIN_QUOTA_US = 1_000  # the kernel refuses a smaller quota
RANK_GROUPS_ENV = "RALP_RANK_GROUPS"  # Horovod ranks: JSON list, rank -> its group's dirs
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_STALE = re.compile(r"^rlp(\d+)")  # groups this project creates: rlp<launcher pid>...
_runs = itertools.count()


def new_prefix() -> str:
    """A name for one run's groups, unique on this machine while this process lives."""
    return f"rlp{os.getpid()}-d{next(_runs)}"


@dataclass(frozen=True)
class DeviceGroup:
    """One device's control group, as a task joins it (picklable: it travels to the task)."""

    name: str
    dirs: tuple[str, ...]  # the group's directory in every hierarchy it lives in

    def joined_command(self, command: list[str]) -> list[str]:
        """``command`` started inside the group: a shell joins it, then execs the command."""
        import shlex

        joins = "".join(f"echo $$ > {shlex.quote(os.path.join(d, 'cgroup.procs'))} && "
                        for d in self.dirs)
        return ["sh", "-c", joins + 'exec "$@"', "sh", *command]

    def holds(self, pid: int | str = "self") -> bool:
        """Whether process ``pid`` (default: the calling one) is in this group, in every
        hierarchy (read from /proc, which a task sees whatever its mounts)."""
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                paths = [line.rstrip("\n").split(":", 2)[-1] for line in f]
        except OSError:
            return False
        tails = ["/" + "/".join(d.rstrip("/").split("/")[-2:]) for d in self.dirs]
        return all(tail in paths for tail in tails)

    def join(self, pid: int | None = None) -> None:
        """Move process ``pid`` (default: the calling process, all its threads) into the group."""
        for directory in self.dirs:
            try:
                with open(os.path.join(directory, "cgroup.procs"), "w") as f:
                    f.write(str(pid or os.getpid()))
            except OSError as e:
                raise ClusterError(f"cannot join control group {directory}: {e.strerror}") from None


def rank_group(rank: int | str | None) -> DeviceGroup | None:
    """The group the launcher named for Horovod rank ``rank`` in ``$RALP_RANK_GROUPS``."""
    import json

    text = os.environ.get(RANK_GROUPS_ENV)
    if not text or rank is None:
        return None
    return DeviceGroup(f"rank{rank}", tuple(json.loads(text)[int(rank)]))


def join_rank_group() -> None:
    """In a Horovod rank: join this rank's group (``HOROVOD_RANK``), unless it is in it
    already (a rank started through ``ip netns exec`` joined before, and cannot see the
    groups from inside); nothing when the launcher named none."""
    group = rank_group(os.environ.get("HOROVOD_RANK"))
    if group is not None and not group.holds():
        group.join()


def rank_group_command(rank: int, command: list[str]) -> list[str]:
    """``command`` (shell words) started in rank ``rank``'s group, if it has one."""
    group = rank_group(rank)
    return command if group is None else group.joined_command(command)


class DeviceGroups:
    """The control groups of one run: a parent group named ``prefix`` with one child per
    device, each limited to ``cpus`` CPUs (None: no limit, the CPU is only counted), plus
    ``unlimited`` children that only count (the coordinator, a launcher).

    With a ``watcher`` (:mod:`ralp.emulation.watchers`), its own groups are made with the
    others (unlimited, counted), it starts once they exist and stops before they go, and every
    meter reads its counter files.

    Use it as a context manager: the groups exist inside the ``with`` block. Stop every
    process in them first; :meth:`close` waits a moment for the kernel to let them go.
    """

    def __init__(self, hierarchy: Hierarchy, prefix: str, devices: Iterable[str],
                 cpus: float | None, *, unlimited: Iterable[str] = (),
                 period_us: int = PERIOD_US, watcher: DeviceWatcher | None = None):
        if not _NAME.match(prefix):
            raise ClusterError(f"control group prefix {prefix!r}: use letters, digits, '_.-'")
        self.hierarchy, self.prefix, self.period_us = hierarchy, prefix, period_us
        self.devices = tuple(devices)
        self.watcher = watcher
        self.watcher_groups = tuple(watcher.groups) if watcher is not None else ()
        self.unlimited = tuple(unlimited) + self.watcher_groups
        self._watch_files: tuple[str, ...] = ()
        self._watching = False
        bad = [n for n in (*self.devices, *self.unlimited) if not _NAME.match(n)]
        if bad or len(set(self.devices + self.unlimited)) != len(self.devices + self.unlimited):
            raise ClusterError(f"device names {bad or 'repeated'}: give each a name of letters, digits, '_.-'")
        if cpus is not None and cpus * period_us < MIN_QUOTA_US:
            raise ClusterError(f"a budget of {cpus:g} CPU per device is below the kernel's "
                               f"smallest quota ({MIN_QUOTA_US / period_us:g} CPU)")
        self.cpus = cpus
        self._made: list[str] = []  # directories made, parents first

    def open(self) -> DeviceGroups:
        sweep_stale(self.hierarchy)
        try:
            for root in self.hierarchy.roots:
                self._mkdir(os.path.join(root, self.prefix))
            if self.hierarchy.version == 2:  # children get the cpu controller from the parent
                _write(os.path.join(self.hierarchy.limit, self.prefix, "cgroup.subtree_control"), "+cpu")
            for name in self.devices + self.unlimited:
                for root in self.hierarchy.roots:
                    self._mkdir(os.path.join(root, self.prefix, name))
                self.limit(name, self.cpus if name in self.devices else None)
            if self.watcher is not None:
                self._watching = True
                self._watch_files = tuple(self.watcher.start(self))
        except BaseException:
            self.close()
            raise
        return self

    def _mkdir(self, path: str) -> None:
        try:
            os.mkdir(path)
        except FileExistsError:
            raise ClusterError(f"control group {path} exists: a run with prefix {self.prefix!r} "
                               "is open already") from None
        except OSError as e:
            raise ClusterError(f"cannot create control group {path}: {e.strerror}") from None
        self._made.append(path)

    def limit(self, name: str, cpus: float | None) -> None:
        """Set group ``name``'s CPU bandwidth to ``cpus`` CPUs (None: no limit, only counted;
        never below the kernel's smallest quota). :meth:`open` gives every group its budget
        so; a device watcher may change a device's while the run goes on.

        Raises:
            ClusterError: no such group in this run, or the kernel refused the limit.
        """
        if name not in self.devices + self.unlimited:
            raise ClusterError(f"no device {name!r} in this run's groups")
        directory = os.path.join(self.hierarchy.limit, self.prefix, name)
        quota = -1 if cpus is None else max(MIN_QUOTA_US, round(cpus * self.period_us))
        if self.hierarchy.version == 2:
            _write(os.path.join(directory, "cpu.max"),
                   f"{'max' if quota < 0 else quota} {self.period_us}")
        else:  # the period first: a quota above the old period's would be refused otherwise
            _write(os.path.join(directory, "cpu.cfs_period_us"), str(self.period_us))
            _write(os.path.join(directory, "cpu.cfs_quota_us"), str(quota))

    def group(self, name: str) -> DeviceGroup:
        if name not in self.devices + self.unlimited:
            raise ClusterError(f"no device {name!r} in this run's groups")
        dirs = tuple(os.path.join(root, self.prefix, name) for root in self.hierarchy.roots)
        return DeviceGroup(name, dirs)

    def meter(self, tasks: Mapping[str, str]) -> DeviceMeter:
        """A reader of the groups' counters keyed by task (``{"worker:0": "w0", ...}``)."""
        tasks = {**tasks, **{name: name for name in self.watcher_groups}}
        return DeviceMeter(self.hierarchy,
                           tuple((task, f"{self.prefix}/{name}") for task, name in tasks.items()),
                           self._watch_files)

    def close(self, wait_s: float = 5.0) -> list[str]:
        """Stop the watcher, remove the groups, children first; returns those that could not
        be removed (a process still inside). Never raises: cleanup must finish."""
        watching, self._watching, self._watch_files = self._watching, False, ()
        if watching:
            with contextlib.suppress(Exception):  # a watcher's failure: the groups still go
                self.watcher.stop()
        made, self._made = self._made, []
        return remove_groups(sorted(made, key=len, reverse=True), wait_s)

    def __enter__(self) -> DeviceGroups:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise ClusterError(f"cannot write {text!r} to {path}: {e.strerror}") from None


def remove_groups(paths: list[str], wait_s: float = 5.0) -> list[str]:
    """rmdir each group (deepest first), retrying while the kernel still lists an exiting
    process in it; returns those left."""
    deadline = time.monotonic() + wait_s
    left = list(paths)
    while True:
        still = []
        for path in left:
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                if e.errno != errno.EBUSY:
                    continue  # not ours to retry
                still.append(path)
        if not still or time.monotonic() > deadline:
            return still
        left = still
        time.sleep(0.05)


def sweep_stale(hierarchy: Hierarchy) -> list[str]:
    """Remove the groups of runs whose launcher is dead (a SIGKILLed run leaves its own)."""
    stale = []
    for root in hierarchy.roots:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            m = _STALE.match(name)
            pid = int(m[1]) if m else 0
            if os.path.isdir(os.path.join(root, name)) and owner_gone(pid):
                parent = os.path.join(root, name)
                stale += [os.path.join(parent, c) for c in os.listdir(parent)
                          if os.path.isdir(os.path.join(parent, c))] + [parent]
    remove_groups(stale, wait_s=0.0)
    return stale
