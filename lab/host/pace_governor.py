"""Paced budgets: a device whose speed does not follow the host's pace.

A budget of C CPUs buys C CPU-seconds per second, but a CPU-second of this host does not buy
the same work from one second to the next (:mod:`lab.host.pace_probes`), and a budgeted
round's images/s follows the host's compute pace where the devices' CPU bounds the steps. A
real device does the same work every second. So a paced budget gives each device the CPU time
that buys a constant amount of work: every ``interval_s`` the governor reads the pace probes'
compute pace over the last ``window_s`` and sets every device's quota to
``budget x min(1, reference / pace)``.

The reference is a fixed share (:data:`REFERENCE_SHARE`) of the compute pace this host gave
when the run's first budget was made, idle, so that the quota only ever shrinks below the
budget: the budgets' sum never grows, and a device is as fast as its budget's CPUs at that
slower pace. When the host is slower than the reference, the governor cannot make up for it;
it counts that time (``under_reference_s``) and the record says so.

The governor runs as a thread of the process that owns the groups (outside every budget) and
keeps its cumulative counters in a small file that the devices' meter reads, as it reads the
probes', so a record gets the mean quota of exactly its window. The lab's device watcher
(:mod:`lab.host.pace_watcher`) starts it for the ``paced`` budget.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from lab.host.pace_probes import PaceProbes, PaceReading
from ralp.emulation.counter_files import CounterFile, read_counters

REFERENCE_ENV = "RALP_PACE_REFERENCE"  # the compute pace a paced device is held to, by hand
REFERENCE_SHARE = 0.8  # of the idle host's median second: below what budgeted rounds ran at
REFERENCE_SECONDS = 5  # how long the idle host's pace is measured for the reference
INTERVAL_S = 0.25  # how often the quotas are set
WINDOW_S = 1.0  # the pace the quotas follow: over the last second
MIN_SHARE = 0.5  # a quota never falls below half the budget (a stalled probe reads as fast)
COUNTERS = 3  # in the governor's file: elapsed_s, share_s, under_reference_s


@dataclass(frozen=True)
class GovernorReading:
    """Cumulative seconds governed, the integral of the quota's share of the budget over
    them, and the seconds the host was slower than the reference."""

    elapsed_s: float
    share_s: float
    under_reference_s: float

    def since(self, start: GovernorReading) -> dict[str, float] | None:
        """The mean quota share and the share of time under the reference in between."""
        elapsed = self.elapsed_s - start.elapsed_s
        if elapsed <= 0:
            return None
        return {"quota_share": (self.share_s - start.share_s) / elapsed,
                "under_reference_share": (self.under_reference_s - start.under_reference_s) / elapsed}


def read_governor(path: str) -> GovernorReading | None:
    """The governor's counters in ``path`` (None if it cannot be read yet)."""
    values = read_counters(path)
    return None if values is None or len(values) != COUNTERS else GovernorReading(*values)


def quota_share(reference: float, pace: float | None) -> float:
    """The share of its budget a device gets while the host's compute pace is ``pace``:
    enough CPU time to do the reference's work, never more than the budget."""
    if not pace or pace <= 0:
        return 1.0
    return max(MIN_SHARE, min(1.0, reference / pace))


@functools.cache
def pace_reference() -> float:
    """The compute pace (work per CPU-second) a paced device is held to: ``$RALP_PACE_REFERENCE``
    if set, else :data:`REFERENCE_SHARE` of the idle host's median second over
    :data:`REFERENCE_SECONDS` seconds, measured once per process tree (so every round of one
    bench, and the calibrations it runs, hold their devices to the same pace)."""
    text = os.environ.get(REFERENCE_ENV)
    if text:
        return float(text)
    import statistics

    from lab.host.pace_probes import watch

    series = watch(REFERENCE_SECONDS)
    values = [s["compute"] for s in series if s["compute"]]
    reference = REFERENCE_SHARE * statistics.median(values)
    # the processes this one starts (a calibration the bench runs first, say) hold their
    # devices to the same pace
    os.environ[REFERENCE_ENV] = repr(reference)
    return reference


class PaceGovernor:
    """Sets the devices' quotas from the pace ``probes`` measure, every ``interval_s``.

    ``set_share(share)`` applies a quota share to every device
    (:func:`lab.host.pace_watcher.share_setter`); ``path`` is where the counters go. Use
    :meth:`start` and :meth:`stop` (or ``with``)."""

    def __init__(self, probes: PaceProbes, reference: float, set_share: Callable[[float], None],
                 path: str, interval_s: float = INTERVAL_S, window_s: float = WINDOW_S):
        self.probes, self.reference, self.set_share = probes, reference, set_share
        self.path, self.interval_s, self.window_s = path, interval_s, window_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._counters: CounterFile | None = None
        # a thread that outlives stop's join (stuck setting a quota) must not write a closed file
        self._counters_lock = threading.Lock()

    def start(self) -> PaceGovernor:
        self._counters = CounterFile(self.path, (0.0,) * COUNTERS)
        self._thread = threading.Thread(target=self._run, name="lab-pace-governor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._counters_lock:
            counters, self._counters = self._counters, None
            if counters is not None:
                counters.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    def __enter__(self) -> PaceGovernor:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        history: collections.deque[tuple[float, PaceReading]] = collections.deque()
        share, elapsed, share_s, under_s = 1.0, 0.0, 0.0, 0.0
        last = time.monotonic()
        while not self._stop.wait(self.interval_s):
            now = time.monotonic()
            dt, last = now - last, now
            elapsed, share_s = elapsed + dt, share_s + share * dt  # the share that held till now
            reading = self.probes.read()
            if reading is None:
                continue
            history.append((now, reading))
            while len(history) > 2 and now - history[1][0] >= self.window_s:
                history.popleft()
            pace = reading.since(history[0][1])["compute"] if len(history) > 1 else None
            if pace is not None and pace < self.reference:
                under_s += dt
            new = quota_share(self.reference, pace)
            if new != share:
                with contextlib.suppress(Exception):  # a group removed under us: the run ends
                    self.set_share(new)
                share = new
            with self._counters_lock:
                if self._counters is not None:
                    self._counters.write(elapsed, share_s, under_s)

