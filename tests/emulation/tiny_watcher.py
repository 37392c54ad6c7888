"""A device watcher for the tests of ralp's extension point (:mod:`ralp.emulation.watchers`):
it logs its starts and stops, keeps one counter file that a test moves, and reports how far the
counter moved in a window and the CPU its own group used."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence

from ralp.emulation.counter_files import CounterFile, Counters

SPEC = "tests.emulation.tiny_watcher:TinyWatcher"  # $RALP_DEVICE_WATCHER's value for it
GROUP = "tiny"


class TinyWatcher:
    budgets = {"tiny": "the default budget, watched by the tests' watcher"}
    groups = (GROUP,)

    def __init__(self, asked: str = "auto", cpus: float | None = None):
        self.asked, self.cpus = asked, cpus
        self.events: list[str] = []
        self.counters: CounterFile | None = None
        self.path: str | None = None

    def describe(self) -> str:
        return f"watched as {self.asked!r}"

    def start(self, devices) -> tuple[str, ...]:
        self.events.append(f"start {devices.prefix}")
        fd, self.path = tempfile.mkstemp(prefix="ralp-test-watcher-")
        os.close(fd)
        self.counters = CounterFile(self.path, (0.0,))
        return (self.path,)

    def stop(self) -> None:
        self.events.append("stop")
        if self.counters is not None:
            self.counters.close()
            os.unlink(self.path)
            self.counters = None

    def window(self, before: Sequence[Counters | None], after: Sequence[Counters | None],
               own_cpus: Mapping[str, float]) -> dict:
        moved = after[0][0] - before[0][0] if before[0] and after[0] else None
        return {"tiny": {"moved": moved, "asked": self.asked}, "tiny_cpus": own_cpus.get(GROUP)}
