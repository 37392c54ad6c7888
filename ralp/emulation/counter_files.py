"""Counter files: a few cumulative float64 counters that one process writes in place and any
other reads, whole, without a lock.

A device watcher (:mod:`ralp.emulation.watchers`) keeps its counters in such files so that the
devices' meter (:mod:`ralp.emulation.cpu_meter`) can read them in whichever process knows the
measured window. The format: a little-endian uint64 sequence number, then the counters as
float64. The writer makes the number odd while it writes and even once done; a reader keeps a
reading only when the number is even and the same after the counters were read. Nothing here
imports another module of ralp.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence

Counters = tuple[float, ...]
_SEQ = struct.Struct("<Q")  # a counter file's sequence number, before its float64 counters


def read_counters(path: str) -> Counters | None:
    """The counters of a :class:`CounterFile` (None if it cannot be read yet, or is gone).
    The writer makes the sequence number odd while it writes: a reading is kept only when
    the number is even and the same after the counters were read."""
    try:
        with open(path, "rb") as f:
            for _ in range(100):
                data = f.read()
                count = (len(data) - _SEQ.size) // 8
                if count < 1:
                    return None
                seq, *values = struct.unpack_from(f"<Q{count}d", data)
                f.seek(0)
                again = _SEQ.unpack(f.read(_SEQ.size))[0]
                f.seek(0)
                if seq % 2 == 0 and seq == again:
                    return tuple(values)
    except OSError:
        return None
    return None


class CounterFile:
    """A small file of float64 counters after a sequence number, written in place (mmap) for
    :func:`read_counters` in other processes."""

    def __init__(self, path: str, values: Sequence[float]):
        self.layout, self._seq = struct.Struct(f"<Q{len(values)}d"), 0
        with open(path, "w+b") as f:
            f.write(self.layout.pack(0, *values))
            f.flush()
            self._shared = mmap.mmap(f.fileno(), self.layout.size)

    def write(self, *values: float) -> None:
        self.layout.pack_into(self._shared, 0, self._seq + 1, *values)  # odd: being written
        self._seq += 2
        self.layout.pack_into(self._shared, 0, self._seq, *values)

    def close(self) -> None:
        self._shared.close()
