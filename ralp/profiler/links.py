"""Bytes over one link, sent and received: shared by the byte model and the link counters.

Kept free of TensorFlow imports: the simulated cluster reads counters into it in processes
that must not load TensorFlow just for that.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinkBytes:
    tx: int = 0
    rx: int = 0

    @property
    def total(self) -> int:
        return self.tx + self.rx
