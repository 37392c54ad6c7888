"""``ralp.profile(model)``: layer table -> skewness -> eligibility -> split -> byte model.

Each stage is its own module; this one chains them and keeps the result in one value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ralp._text import human_bytes
from ralp.defaults import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_PS,
    DEFAULT_THRESHOLD,
    DEFAULT_WORKERS,
)
from ralp.modes import HOROVOD, PS, RALP
from ralp.profiler.bytes_model import StepTraffic, mode_traffic
from ralp.profiler.layer_table import LayerTable, ProfileError, build_layer_table
from ralp.profiler.ps_assignment import spread_layers
from ralp.profiler.skewness import is_eligible, position_skewness
from ralp.profiler.split import SplitChoice, SplitLayer, cut_sources, find_split
from ralp.profiler.trainable import several_outputs


@dataclass(frozen=True)
class Profile:
    table: LayerTable
    skewness: float
    threshold: float
    eligible: bool
    split: SplitChoice  # the best admissible split, whether or not the model is eligible
    workers: int
    ps: int
    bytes_per_step: dict[str, StepTraffic]  # "ps", "horovod", "ralp"
    boundary_layers: tuple[str, ...]  # layers whose outputs cross at the candidate split
    refusal: str | None = None  # why ralp's trainers cannot take the model (several outputs)

    @property
    def model(self) -> str:
        return self.table.model_name

    @property
    def batch_size(self) -> int:
        return self.table.batch_size

    @property
    def params_total(self) -> int:
        return self.table.params_total

    @property
    def positions(self) -> int:
        """How many rows hold a position in the skewness variable (conv, pool, fc)."""
        return len(self.table.position_weights)

    @property
    def candidate_split_after(self) -> str | None:
        return None if self.split.index is None else self.table.rows[self.split.index].name

    @property
    def split_after(self) -> str | None:
        """The layer after which RALP splits, or None when placement is not worth it."""
        return self.candidate_split_after if self.eligible else None

    @property
    def offloaded_layers(self) -> list[str]:
        if self.split_after is None:
            return []
        return [r.name for r in self.table.rows[self.split.index + 1 :]]

    @property
    def boundary_bytes(self) -> int:
        """Activation bytes per step (one worker batch) crossing at the candidate split."""
        return sum(self.table.row(name).output_bytes for name in self.boundary_layers)

    @property
    def offloaded_params(self) -> int:
        return sum(self.table.row(name).params for name in self.offloaded_layers)

    def traffic(self, offloaded: Mapping[str, int] | None = None) -> StepTraffic:
        """Bytes per step of a PS placement on this profile's cluster: plain PS when nothing is
        ``offloaded`` (layer -> PS task), else RALP with those layers on the PS."""
        return mode_traffic(self.table, RALP, self.workers, self.ps, offloaded)

    @property
    def busiest_link_bytes(self) -> dict[str, int]:
        """Per mode, the bytes per step on its busiest link (busier direction)."""
        return {mode: t.busiest_link_bytes for mode, t in self.bytes_per_step.items()}

    def _wire_caveat(self) -> str:
        """What the busiest links say against the skewness rule: the PS link carries every
        worker's boundary and kept variables, while Horovod spreads its bytes over the
        workers' links, so a model with little to offload can lose to it on the wire."""
        link = self.busiest_link_bytes
        ralp, ps, hvd = link[RALP], link[PS], link[HOROVOD]
        text = (
            f"; busiest link {human_bytes(ralp)} per step against {human_bytes(ps)} for "
            f"plain PS and {human_bytes(hvd)} for Horovod"
        )
        slower = [name for name, other in (("plain PS", ps), ("Horovod", hvd)) if other < ralp]
        if slower:
            text += (
                f". Caution: {' and '.join(slower)} load{'s' if len(slower) == 1 else ''} the "
                f"busiest link less, so on a bandwidth-bound network expect "
                f"{'it' if len(slower) == 1 else 'them'} to be faster; measure with "
                f"python -m ralp.bench --modes ps ralp-n horovod"
            )
        return text

    @property
    def verdict(self) -> str:
        """One honest sentence: whether placement pays off for this model, and why."""
        s, k = self.skewness, self.threshold
        ratio = self.bytes_per_step[RALP].total / max(1, self.bytes_per_step[PS].total)
        if self.refusal is not None:
            return f"ralp cannot train it: {self.refusal}"
        if self.split.index is None:
            return f"nothing to offload ({self.split.reason}); train with plain PS"
        if not self.eligible:
            return (
                f"not eligible: S = {s:.3f} (over {self.positions} conv, pool and fc "
                f"positions) > K = {k:g}, the parameter mass is not skewed towards the late "
                f"layers; train with plain PS. (Forcing a split after "
                f"{self.candidate_split_after!r} would move {ratio:.3f}x the bytes of plain PS.)"
            )
        share = self.offloaded_params / max(1, self.params_total)
        return (
            f"eligible (S = {s:.3f} over {self.positions} conv, pool and fc positions "
            f"<= K = {k:g}): split after {self.split_after!r}; "
            f"{len(self.offloaded_layers)} layers holding {share:.1%} of the parameters move to "
            f"the PS; bytes per step {ratio:.3f}x of plain PS" + self._wire_caveat()
        )


def profile(
    model,
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    workers: int = DEFAULT_WORKERS,
    ps: int = DEFAULT_PS,
) -> Profile:
    """Profile a Keras 3 Sequential or functional model from its shapes alone.

    Returns the layer table, the skewness S of the parameter mass, whether S <= ``threshold``,
    the split point and the bytes per step of plain PS, Horovod and RALP with ``workers``
    workers and ``ps`` PS tasks. Raises :class:`ProfileError` for models it cannot profile.
    """
    if not isinstance(workers, int) or workers < 1:
        raise ProfileError(f"workers must be a positive integer, got {workers!r}")
    if not isinstance(ps, int) or ps < 1:
        raise ProfileError(f"ps must be a positive integer, got {ps!r}")
    if not isinstance(threshold, int | float) or math.isnan(threshold):  # inf: always eligible
        raise ProfileError(f"threshold must be a number (the skewness bound K), got "
                           f"{threshold!r}")
    table = build_layer_table(model, batch_size)
    skew = position_skewness(table.position_weights)
    split_layers = [
        SplitLayer(r.name, r.kind, r.params, r.output_elements, r.inbound) for r in table.rows
    ]
    split = find_split(split_layers, batch_size)

    # RALP bytes at the best admissible split (what mode "ralp" would move if forced), or
    # plain PS traffic when there is nothing to offload.
    offloaded: dict[str, int] = {}
    boundary: list[str] = []
    if split.index is not None:
        moved = table.rows[split.index + 1 :]
        offloaded = spread_layers([r.name for r in moved], [r.param_bytes for r in moved], ps)
        boundary = cut_sources(split_layers, split.index)
    return Profile(
        table=table,
        skewness=skew,
        threshold=threshold,
        eligible=is_eligible(skew, threshold),
        split=split,
        workers=workers,
        ps=ps,
        bytes_per_step={
            PS: mode_traffic(table, PS, workers, ps),
            HOROVOD: mode_traffic(table, HOROVOD, workers),
            RALP: mode_traffic(table, RALP, workers, ps, offloaded),
        },
        boundary_layers=tuple(boundary),
        refusal=several_outputs(model),
    )
