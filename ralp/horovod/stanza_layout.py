"""Which rank of a Stanza job does what (:mod:`ralp.horovod.stanza`): the last n_f of N ranks
are FC ranks, each serving a group of consecutive CONV ranks."""

from __future__ import annotations

from dataclasses import dataclass

from ralp.errors import RalpError


class StanzaError(RalpError, ValueError):
    """A Stanza job that cannot run as asked; the message says what to change."""


@dataclass(frozen=True)
class StanzaLayout:
    """Which rank does what: ``size`` ranks, the last ``fc_workers`` of them FC ranks."""

    size: int
    fc_workers: int

    def __post_init__(self) -> None:
        if self.size < 2:
            raise StanzaError(f"Stanza needs at least 2 ranks (a CONV rank and an FC rank), "
                              f"got {self.size}")
        if self.fc_workers < 1:
            raise StanzaError(f"Stanza needs at least one FC rank, got {self.fc_workers}")
        if self.fc_workers > self.conv_workers:
            raise StanzaError(
                f"{self.fc_workers} FC ranks but only {self.conv_workers} CONV ranks out of "
                f"{self.size}: each FC rank serves a group of at least one CONV rank; ask for "
                f"at most {self.size // 2} FC ranks"
            )

    @property
    def conv_workers(self) -> int:
        return self.size - self.fc_workers

    @property
    def conv_ranks(self) -> tuple[int, ...]:
        return tuple(range(self.conv_workers))

    @property
    def fc_ranks(self) -> tuple[int, ...]:
        return tuple(range(self.conv_workers, self.size))

    def group(self, fc_index: int) -> tuple[int, ...]:
        """The CONV ranks FC rank ``fc_index`` serves: consecutive, sizes differ by one at most."""
        from ralp.profiler.bytes_model import stanza_groups  # the byte model's groups

        return tuple(stanza_groups(self.conv_workers, self.fc_workers)[fc_index])

    def share(self, fc_index: int) -> float:
        """The fraction of the global batch that FC rank ``fc_index``'s group holds."""
        return len(self.group(fc_index)) / self.conv_workers

    def fc_rank_of(self, conv_rank: int) -> int:
        """The global rank of the FC rank that serves ``conv_rank``."""
        for g in range(self.fc_workers):
            if conv_rank in self.group(g):
                return self.conv_workers + g
        raise StanzaError(f"rank {conv_rank} is not a CONV rank of {self}")

    def is_fc(self, rank: int) -> bool:
        return rank >= self.conv_workers
