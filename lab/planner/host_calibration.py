"""The simulated cluster's calibration: the device's compute (the product's
:class:`ralp.planner.calibration.Entry`) and the host's contention facts the lab's step
models read (:class:`lab.planner.host.Host`), as JSON of the lab's own format (``"format": 1``,
the layout of every calibration recorded in ``lab/results``).

``host.shared`` says whether the cluster being planned shares this host's cores (the
simulated netns cluster on shared CPUs: True) or gives each task its own device (False).
A product calibration (schema version 2, compute only) loads here with a default
:class:`Host` of devices of their own.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from lab.planner.host import Host
from ralp.errors import InvalidArgumentError
from ralp.planner.calibration import (
    SCHEMA_VERSION,
    Calibration,
    Entry,
    find_entry,
    read_file,
)
from ralp.planner.terms import Compute

LAB_FORMAT = 1
CALIBRATE = "python -m lab.planner.calibrate"  # the command that writes one


@dataclass(frozen=True)
class SharedCompute(Compute):
    """One device's compute, with Stanza's two compute phases measured under Horovod on the
    shared host: (CONV ranks, heads' phase s, FC tail's phase s) with one FC rank. Ranks
    waiting in a collective keep polling and take CPU from the ones computing. None: not
    measured (the phases are the single-process times)."""

    stanza_beside: tuple[int, float, float] | None = None


@dataclass(frozen=True)
class HostEntry(Entry):
    # Shared host only: single-process steps of this workload the host runs at once
    # (:mod:`lab.planner.capacity`); None: the host's figure. It depends on the model: how
    # much of one process's step spreads over the cores.
    capacity: float | None = None
    # the capacity at several process counts, [[processes, capacity], ...] (JSON lists)
    capacities: list | None = None
    # Shared host only: Stanza's compute phases under Horovod here
    # (:mod:`lab.planner.stanza_phases_probe`), [CONV ranks, heads' phase s, tail's phase s]
    stanza_beside: list | None = None

    @classmethod
    def of(cls, entry: Entry, **extra) -> HostEntry:
        """``entry`` (a product entry) with the host's figures ``extra``."""
        return cls(**{f.name: getattr(entry, f.name) for f in fields(Entry)}, **extra)

    def host_for(self, host: Host) -> Host:
        """``host`` with this workload's measured capacity, where it shares its cores."""
        if host.shared and self.capacity is not None:
            measured = tuple((int(n), float(c)) for n, c in self.capacities or ())
            return replace(host, capacity=self.capacity, capacities=measured)
        return host

    @property
    def compute(self) -> SharedCompute:
        beside = None
        if self.stanza_beside is not None:
            conv, heads, tail = self.stanza_beside
            beside = (int(conv), float(heads), float(tail))
        return SharedCompute(self.full_s, self.tail_s, self.tail_stacked_s, self.stacked,
                             self.head_s, beside)


@dataclass
class HostCalibration:
    host: Host
    entries: list[HostEntry] = field(default_factory=list)
    machine: str = ""  # where it was measured (hostname, cores), for the reader

    def find(self, model: str, batch_size: int, image_size: int, num_classes: int) -> HostEntry:
        return find_entry(self.entries, (model, batch_size, image_size, num_classes), CALIBRATE)

    def add(self, entry: Entry) -> None:
        if not isinstance(entry, HostEntry):
            entry = HostEntry.of(entry)
        self.entries = [e for e in self.entries if e.key != entry.key] + [entry]

    def to_dict(self) -> dict:
        return {"format": LAB_FORMAT, "machine": self.machine,
                "host": asdict(self.host), "entries": [asdict(e) for e in self.entries]}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> HostCalibration:
        return read_file(path, cls.from_dict, CALIBRATE)

    @classmethod
    def from_dict(cls, data: dict) -> HostCalibration:
        """The inverse of :meth:`to_dict`; a product calibration (compute only) gets a
        default :class:`Host`. ValueError says what a malformed one lacks."""
        if isinstance(data, dict) and data.get("schema_version") == SCHEMA_VERSION:
            product = Calibration.from_dict(data)
            return cls(Host(False), [HostEntry.of(e) for e in product.entries], product.machine)
        if not isinstance(data, dict):
            raise InvalidArgumentError(f"a calibration is a JSON object, not a {type(data).__name__}")
        missing = [k for k in ("format", "host", "entries") if k not in data]
        if missing:
            raise InvalidArgumentError(f"not a calibration: it has no {', '.join(map(repr, missing))}")
        if data.get("format") != LAB_FORMAT:
            raise InvalidArgumentError(f"format {data.get('format')!r}, expected {LAB_FORMAT}")
        if not isinstance(data["host"], dict) or not isinstance(data["entries"], list):
            raise InvalidArgumentError("not a calibration: 'host' must be an object, 'entries' a list")
        host = dict(data["host"])
        host["capacities"] = tuple((int(n), float(c)) for n, c in host.get("capacities", ()))
        for curve in ("ring_overlaps", "collective_overlaps", "fabric_cpu_s_per_byte"):
            host[curve] = tuple(sorted((float(r), float(o)) for r, o in host.get(curve, ())))
        return cls(Host(**host), [HostEntry(**e) for e in data["entries"]],
                   data.get("machine", ""))

    def merged(self, other: HostCalibration) -> HostCalibration:
        """This calibration with ``other``'s entries and host replacing its own."""
        out = HostCalibration(other.host, list(self.entries), other.machine or self.machine)
        for e in other.entries:
            out.add(e)
        return out
