"""A model's planning inputs from its shapes alone: the split RALP would use and, per mode
and cluster, the byte model's :class:`~ralp.planner.terms.Links`."""

from __future__ import annotations

from dataclasses import dataclass

from ralp import modes as registry
from ralp.planner.modes import PlannerError, resources
from ralp.planner.terms import Links
from ralp.profiler.api import Profile
from ralp.profiler.bytes_model import mode_traffic, ring_allreduce_bytes
from ralp.profiler.layer_table import LayerTable


@dataclass(frozen=True)
class Workload:
    """What the planner knows of one model at one per-worker batch, without running it."""

    profile: Profile  # skewness verdict and candidate split

    def __post_init__(self) -> None:
        if self.profile.refusal is not None:  # ralp.wrap would refuse it: no plan to run
            raise PlannerError(self.profile.refusal)

    @property
    def table(self) -> LayerTable:
        return self.profile.table

    @property
    def offloaded(self) -> tuple[str, ...]:
        """The layers RALP modes offload: everything after the candidate split, whatever the
        skewness says (as ``python -m ralp.bench --modes ralp-n`` runs them)."""
        split = self.profile.split.index
        return () if split is None else tuple(r.name for r in self.table.rows[split + 1 :])

    def links(self, mode: str, devices: int) -> tuple[int, int, Links]:
        """(workers, ps, links) of ``mode`` on ``devices`` devices."""
        workers, ps = resources(mode, devices)
        return workers, ps, self.links_on(mode, workers, ps)

    def links_on(self, mode: str, workers: int, ps: int) -> Links:
        """The byte model's links of ``mode`` on a given cluster shape (``ralp.wrap`` on a
        cluster it did not size). A RALP mode's tail is on ps:0, as the planner's RALP model
        assumes (one PS critical section)."""
        entry = registry.MODES[mode]
        if entry.family == registry.LAYER_SPLIT:
            return self._stanza_links(workers, ps)
        if entry.family == registry.ALLREDUCE:
            t = mode_traffic(self.table, entry.bytes_key, workers)
            return Links((), (), t.worker_link.tx, t.total, 2 * (workers - 1))
        offloaded = {name: 0 for name in self.offloaded} if entry.offloads else {}
        t = mode_traffic(self.table, registry.RALP, workers, ps, offloaded)
        moved = set(offloaded)
        kept_vars = sum(1 for row, _, _ in self.table.variables if row not in moved)
        messages = 2 * kept_vars + (2 * len(self.profile.boundary_layers) if moved else 0)
        return Links(tuple(link.tx for link in t.ps_links), tuple(link.rx for link in t.ps_links),
                     t.worker_link.tx, t.total, messages)

    @property
    def tail_trainable_bytes(self) -> int:
        moved = set(self.offloaded)
        return sum(r.trainable_param_bytes for r in self.table.rows if r.name in moved)

    def _stanza_links(self, conv: int, fc: int) -> Links:
        """Stanza's links: CONV ranks are the workers, FC ranks the ps links; the rings'
        bytes apart (they run after the activations' exchange)."""
        if not self.offloaded:
            raise PlannerError(f"mode {registry.STANZA!r} needs layers to put on the FC ranks; "
                               f"{self.profile.model} has none after its split")
        t = mode_traffic(self.table, registry.MODES[registry.STANZA].bytes_key, conv, fc, {name: 0 for name in self.offloaded})
        tail = self.tail_trainable_bytes
        head = self.table.trainable_param_bytes_total - tail
        rings = (ring_allreduce_bytes(head, conv), ring_allreduce_bytes(tail, fc))
        return Links(tuple(link.tx for link in t.ps_links), tuple(link.rx for link in t.ps_links),
                     t.worker_link.tx, t.total, 2 * (conv - 1) + 2 * (fc - 1), rings)

    def fc_rank_bytes(self, group: int) -> int:
        """Memory an FC rank needs for a group of ``group`` CONV ranks (an estimate): the
        tail's variables three times (weights, gradients, one optimizer slot) and, for the
        group's stacked batch, the tail's inputs and every tail layer's output twice
        (forward value and its gradient)."""
        moved = set(self.offloaded)
        rows = [r for r in self.table.rows if r.name in moved]
        inputs = sum(r.output_bytes for r in self.table.rows
                     if r.name in {src for t in rows for src in t.inbound} - moved)
        activations = inputs + sum(r.output_bytes for r in rows)
        return 3 * sum(r.param_bytes for r in rows) + 2 * group * activations
