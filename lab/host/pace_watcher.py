"""The lab's device watcher: the host's pace probes beside every simulated run's devices and,
for the ``paced`` budget, the pace governor too.

ralp starts a device watcher with a run's control groups when ``$RALP_DEVICE_WATCHER`` names
one (:mod:`ralp.emulation.watchers`); :data:`ENV` is this one's setting::

    RALP_DEVICE_WATCHER=lab.host.pace_watcher:PaceWatcher \\
        python -m ralp.bench --backend netns --device-cpus auto paced ...

Every record's ``cpu`` then carries ``host_pace`` (the work one CPU-second bought in its
window, per kind of work) and ``pace_probe_cpus`` (the probes' own CPU); a ``paced`` budget's
records also ``paced``: the reference pace, the devices' mean quota as a share of the budget,
and the share of the window the host was slower than the reference (when pacing could not hold
the devices' speed). The reference is measured once, on the idle host, when the first paced
budget is made, and passed on to the processes the bench starts (:func:`pace_reference`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence

from lab.host.pace_governor import REFERENCE_ENV, GovernorReading, PaceGovernor, pace_reference
from lab.host.pace_probes import PaceProbes, summed
from ralp.emulation.counter_files import Counters
from ralp.emulation.watchers import WATCHER_ENV, WatchedDevices
from ralp.errors import ClusterError

PACED = "paced"
PACE_GROUP = "pace"  # the probes' group: counted, outside the budgets
ENV = {WATCHER_ENV: "lab.host.pace_watcher:PaceWatcher"}


class PaceWatcher:
    """The pace probes, and for a ``paced`` budget (or a ``reference`` given) the governor,
    beside one budget's devices, one run at a time."""

    budgets = {PACED: "the default budget held to a constant compute pace: quotas shrink "
                      "while the host is faster than a reference measured at the start"}
    groups = (PACE_GROUP,)

    def __init__(self, asked: str = "auto", cpus: float | None = None, *,
                 reference: float | None = None):
        if reference is None and asked == PACED:
            reference = pace_reference()
        self.reference = reference
        self._probes: PaceProbes | None = None
        self._governor: PaceGovernor | None = None

    def describe(self) -> str:
        if self.reference is None:
            return "host pace probed"
        # the variable's value holds another command (a calibration, a later bench) to this pace
        return (f"paced to {self.reference / 1e9:.1f} GFLOP per CPU-second "
                f"({REFERENCE_ENV}={self.reference:.4g})")

    def start(self, devices: WatchedDevices) -> tuple[str, ...]:
        if self.reference is not None and devices.cpus is None:
            raise ClusterError("a paced budget needs a CPU budget: shared devices have none")
        self._probes = PaceProbes(devices.group(PACE_GROUP)).start()
        if self.reference is None:
            return self._probes.paths
        self._governor = PaceGovernor(self._probes, self.reference, share_setter(devices),
                                      os.path.join(self._probes.directory, "governor")).start()
        return (*self._probes.paths, self._governor.path)

    def stop(self) -> None:
        governor, self._governor = self._governor, None
        probes, self._probes = self._probes, None
        with contextlib.suppress(Exception):
            if governor is not None:
                governor.stop()
        if probes is not None:
            probes.stop()

    def window(self, before: Sequence[Counters | None], after: Sequence[Counters | None],
               own_cpus: Mapping[str, float]) -> dict:
        """``host_pace`` and ``pace_probe_cpus``; for a paced budget ``paced`` too."""
        out: dict = {}
        if PACE_GROUP in own_cpus:
            out["pace_probe_cpus"] = round(own_cpus[PACE_GROUP], 4)
        probes = len(after) - (1 if self.reference is not None else 0)
        start, end = summed(before[:probes]), summed(after[:probes])
        if start is not None and end is not None:
            out["host_pace"] = {kind: None if v is None else round(v, 1)
                                for kind, v in end.since(start).items()}
        if self.reference is not None:
            out["paced"] = {"reference": round(self.reference, 1),
                            **_governed(before[probes:], after[probes:])}
        return out


def share_setter(devices: WatchedDevices) -> Callable[[float], None]:
    """The governor's lever: ``set_share(share)`` sets every device's quota at ``share`` of
    its budget (nothing for shared devices, which have none)."""

    def set_share(share: float) -> None:
        if devices.cpus is None:
            return
        for name in devices.devices:
            devices.limit(name, devices.cpus * share)

    return set_share


def _governed(before: Sequence[Counters | None], after: Sequence[Counters | None]) -> dict:
    """The governor's mean quota share and share of time under the reference in a window
    (empty where its counters could not be read at both edges)."""
    if not before or not after or before[0] is None or after[0] is None:
        return {}
    governed = GovernorReading(*after[0]).since(GovernorReading(*before[0]))
    return {k: round(v, 4) for k, v in (governed or {}).items()}
