"""Device watchers: an extension point for what runs beside a simulated run's devices.

A watcher is code outside ralp (a probe of the host's speed, a governor of the devices' quotas)
that the simulated devices start with their control groups and stop with them, and whose
readings every record's ``cpu`` field carries. ``$RALP_DEVICE_WATCHER`` names its factory as
``module:attribute``; a variable, because the bench makes devices in processes of its own
(a calibration, a Horovod launch), which inherit it. Unset: no watcher, and ralp imports
nothing of it.

The factory is called once for every budget made (:func:`ralp.emulation.budget.budget_for`)
as ``factory(asked, cpus)``: the ``--device-cpus`` word or number asked, and the CPUs per
device (None: shared). It returns a :class:`DeviceWatcher`, or None for nothing to watch.
Its optional attribute ``budgets`` (``{word: one line}``) adds words to ``--device-cpus``:
each gives the default CPUs per device, and the factory tells them apart by ``asked``.
A watcher sees a run's devices as :class:`WatchedDevices`: their groups, their budget and
each group's CPU limit, which it may change (a governor does).

A watcher's readings must be readable in any process (the job that knows its measured window
reads the devices' counters itself), so it keeps cumulative counters in small files
(:mod:`ralp.emulation.counter_files`); the devices' meter reads them with the groups' counters,
and the watcher's :meth:`~DeviceWatcher.window` turns two readings into the fields a record gets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ralp._named import named_attribute
from ralp.emulation.counter_files import Counters
from ralp.errors import ClusterError

WATCHER_ENV = "RALP_DEVICE_WATCHER"  # module:attribute, the factory of the devices' watcher


class WatchedGroup(Protocol):
    """One of a run's control groups, as a watcher uses it
    (a :class:`ralp.emulation.devices.DeviceGroup`)."""

    def joined_command(self, command: list[str]) -> list[str]:
        """``command`` started inside the group."""

    def join(self, pid: int | None = None) -> None:
        """Move process ``pid`` (default: the calling one) into the group."""


class WatchedDevices(Protocol):
    """What a watcher sees of a run's devices (a :class:`ralp.emulation.devices.DeviceGroups`):
    the run's group names, the CPUs per device, each group, and each group's CPU limit."""

    @property
    def prefix(self) -> str:
        """The run's name: its groups' parent."""

    @property
    def devices(self) -> tuple[str, ...]:
        """The budgeted devices' group names."""

    @property
    def cpus(self) -> float | None:
        """Each device's budget in CPUs (None: shared, no limit)."""

    def group(self, name: str) -> WatchedGroup:
        """Group ``name`` of the run (a device's, or one of the watcher's own)."""

    def limit(self, name: str, cpus: float | None) -> None:
        """Set group ``name``'s CPU bandwidth to ``cpus`` CPUs (None: no limit)."""


class DeviceWatcher(Protocol):
    """What runs beside one budget's devices: started when a run's groups exist, stopped
    before they are removed (a budget may serve several runs, one after the other)."""

    groups: tuple[str, ...]  # groups of its own, made with the run's: counted, never limited

    def describe(self) -> str:
        """What the budget's one-line description adds ('' for nothing)."""

    def start(self, devices: WatchedDevices) -> Sequence[str]:
        """Start watching ``devices``; returns the counter files the devices' meter reads."""

    def stop(self) -> None:
        """Stop what :meth:`start` started, remove its files; never raises."""

    def window(self, before: Sequence[Counters | None], after: Sequence[Counters | None],
               own_cpus: Mapping[str, float]) -> dict:
        """The fields a record's ``cpu`` gets for a window: ``before`` and ``after`` hold each
        counter file's counters at its edges (None where one could not be read), ``own_cpus``
        the CPUs each of its :attr:`groups` used over it."""


def factory():
    """The watcher factory ``$RALP_DEVICE_WATCHER`` names (None when unset)."""
    return named_attribute(WATCHER_ENV, "device watcher", ClusterError)


def budget_words() -> Mapping[str, str]:
    """The ``--device-cpus`` words the attached watcher adds (``{word: one line}``)."""
    made = factory()
    return dict(getattr(made, "budgets", {})) if made is not None else {}


def attach(asked: str | float | None, cpus: float | None) -> DeviceWatcher | None:
    """The attached factory's watcher for a budget of ``cpus`` CPUs per device, as ``asked``
    (None without a factory)."""
    made = factory()
    return None if made is None else made(str(asked or "auto"), cpus)
