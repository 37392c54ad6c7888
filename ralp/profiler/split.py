"""Where to split a model (RALP's profiler, step 3; Park et al. 2019).

Splitting after position i sends every later layer to the parameter server. The cost of a
split is what still crosses the network per step, up to constant factors:

    cost(i) = cut(i) * batch + sum_{x <= i} P_x

``cut(i)`` is the number of activation values per sample produced at or before i and consumed
after i. For a chain this is O_i, the output of layer i; for DAGs (skip connections, Inception
branches) it counts every tensor the split cuts. The sum is the parameters still exchanged with
the PS by the workers.

Admissible positions: never between two compute-demand layers (convolutions, including a
Dense applied per pixel), since offloading a convolution would overload the PS; so the split
lies at or after the last convolution. It must also keep at least one parameter-owning layer
on the workers and offload at least one. Two graph shapes rule out more positions:

- a layer called more than once (shared) runs whole on one side: no split may fall between
  its calls (a kept row never consumes a row after the split);
- a nested Sequential/functional model is placed whole: no split may fall inside it (the
  split may come right after it).

Ties go to the earliest position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ralp.profiler.kinds import COMPUTE_DEMAND_KINDS


@dataclass(frozen=True)
class SplitLayer:
    """What the split search needs to know about one layer."""

    name: str
    kind: str
    params: int
    output_elements: int  # per sample
    inbound: tuple[str, ...] = ()  # producers; empty for the model's inputs


@dataclass(frozen=True)
class SplitChoice:
    index: int | None  # split after this layer; None: no admissible split
    cost: int | None
    costs: dict[int, int]  # every admissible position -> its cost
    reason: str

    @property
    def found(self) -> bool:
        return self.index is not None


def cut_sources(layers: Sequence[SplitLayer], i: int) -> list[str]:
    """Layers at positions <= i whose outputs are consumed after i, in forward order."""
    position = {layer.name: k for k, layer in enumerate(layers)}
    crossing = {
        position[src]
        for layer in layers[i + 1 :]
        for src in layer.inbound
        if src in position and position[src] <= i
    }
    return [layers[k].name for k in sorted(crossing)]


def cut_elements(layers: Sequence[SplitLayer], i: int) -> int:
    """Activation values per sample produced at positions <= i and consumed after i."""
    by_name = {layer.name: layer for layer in layers}
    return sum(by_name[name].output_elements for name in cut_sources(layers, i))


def _candidate_positions(layers: Sequence[SplitLayer]) -> list[int]:
    """Positions at or after the last convolution that leave parameters on both sides."""
    last_compute = max(
        (k for k, layer in enumerate(layers) if layer.kind in COMPUTE_DEMAND_KINDS), default=-1
    )
    owning = [k for k, layer in enumerate(layers) if layer.params > 0]
    if len(owning) < 2:
        return []
    first_owner, last_owner = owning[0], owning[-1]
    return [i for i in range(len(layers)) if i >= max(last_compute, first_owner) and i < last_owner]


def graph_conflicts(layers: Sequence[SplitLayer], i: int) -> list[str]:
    """Why a split after position ``i`` cannot be placed: the shared layers it would cut
    between calls and the nested models it would cut inside (empty: it can)."""
    position = {layer.name: k for k, layer in enumerate(layers)}
    problems = []
    for layer in layers[: i + 1]:
        later = [s for s in layer.inbound if position.get(s, -1) > i]
        if later:
            problems.append(
                f"layer {layer.name!r} is called again on {later[0]!r}, which runs after the "
                "split (a shared layer runs whole on one side)"
            )
    spans: dict[str, list[int]] = {}
    for k, layer in enumerate(layers):
        parts = layer.name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            spans.setdefault("/".join(parts[:depth]), []).append(k)
    for nested, ks in spans.items():
        if min(ks) <= i < max(ks):
            problems.append(f"the split would fall inside the nested model {nested!r}")
    return problems


def admissible_positions(layers: Sequence[SplitLayer]) -> list[int]:
    return [i for i in _candidate_positions(layers) if not graph_conflicts(layers, i)]


def find_split(layers: Sequence[SplitLayer], batch_size: int) -> SplitChoice:
    """argmin over admissible positions of cut(i) * batch + cumulative params."""
    positions = admissible_positions(layers)
    if not positions:
        candidates = _candidate_positions(layers)
        if sum(1 for layer in layers if layer.params > 0) < 2:
            reason = "fewer than two layers own parameters: nothing can be split off"
        elif not candidates:
            reason = "no parameter-owning layer follows the last convolution: nothing to offload"
        else:
            reason = (
                "every split after the last convolution is ruled out by the graph: "
                + graph_conflicts(layers, candidates[-1])[0]
            )
        return SplitChoice(None, None, {}, reason)
    cumulative = 0
    cum_params = []
    for layer in layers:
        cumulative += layer.params
        cum_params.append(cumulative)
    costs = {i: cut_elements(layers, i) * batch_size + cum_params[i] for i in positions}
    best = min(positions, key=lambda i: (costs[i], i))
    return SplitChoice(
        best, costs[best], costs, f"argmin over {len(positions)} admissible positions"
    )
