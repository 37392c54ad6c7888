"""A workload as the lab's device step models read it: the product's byte model, plus each
PS-mode worker's layers in forward order (the layer pipeline, :mod:`lab.planner.layer_pipeline`)
and whether the prediction is of an epoch's first cycles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from ralp.planner.terms import Links
from ralp.planner.workload import Workload
from ralp.profiler.bytes_model import variable_homes

RING_MODES = ("horovod", "collective", "stanza")


@dataclass(frozen=True)
class Layer:
    """One layer of a worker's step: its share of the model's forward FLOPs and the
    variables it reads, each as (PS task, bytes)."""

    flops_share: float
    variables: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class DeviceLinks(Links):
    # PS modes: a worker's layers in forward order (RALP's: the head), each its FLOPs share
    # and variables; empty: not known (a step model then treats the worker as one block)
    layers: tuple[Layer, ...] = ()
    # PS modes on devices, with ``layers``: True predicts an epoch's first cycles, the workers
    # moving in lockstep (plain PS's layer pipeline for them all); False, past them
    in_step: bool = False


@dataclass(frozen=True)
class DeviceWorkload(Workload):
    # The PS modes' links carry the worker's layers, so their step on devices comes from the
    # layer pipeline; False: from the queueing network alone (--step-model queue)
    pipeline: bool = True
    # ... and predicts an epoch's first cycles, plain PS's workers in step (--step-model
    # in-step); False: past them, as a training run spends most of its steps
    in_step: bool = False

    @classmethod
    def of(cls, workload: Workload, **options) -> DeviceWorkload:
        """``workload`` (the product's) with the lab's ``options``."""
        if isinstance(workload, DeviceWorkload):
            from dataclasses import replace

            return replace(workload, **options)
        return cls(workload.profile, **options)

    def links_on(self, mode: str, workers: int, ps: int) -> Links:
        links = super().links_on(mode, workers, ps)
        if mode in RING_MODES:
            return links
        offloaded = {name: 0 for name in self.offloaded} if mode.startswith("ralp") else {}
        return DeviceLinks(**{f.name: getattr(links, f.name) for f in fields(Links)},
                           layers=self.layers_on(ps, offloaded) if self.pipeline else (),
                           in_step=self.in_step)

    def layers_on(self, ps: int, offloaded: Mapping[str, int] | None = None) -> tuple[Layer, ...]:
        """A worker's layers in forward order, less the ``offloaded`` ones (RALP's tail, each
        on its PS task): each one's share of the worker's forward FLOPs and its variables, on
        the PS tasks the byte model places them."""
        offloaded = offloaded or {}
        owned: dict[str, list[tuple[int, int]]] = {}
        homes = variable_homes(self.table, offloaded, ps)
        for (row, _, nbytes), home in zip(self.table.variables, homes, strict=True):
            owned.setdefault(row, []).append((home, nbytes))
        rows = [r for r in self.table.rows if r.name not in offloaded]
        total = sum(max(0, r.flops) for r in rows) or 1
        return tuple(Layer(max(0, r.flops) / total, tuple(owned.get(r.name, ()))) for r in rows)
