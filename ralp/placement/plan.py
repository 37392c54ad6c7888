"""The placement plan: which layers run on which parameter-server task.

A :class:`Plan` is a small value object. It lists the model's layers in forward order and, for
each *offloaded* layer, the PS task that holds its variables and runs its forward, backward and
update ops. Every other layer stays on the workers; its variables go round-robin over the PS
tasks, as plain ``ParameterServerStrategy`` does.

Plans come from the profiler (:meth:`Plan.from_profile`), from an explicit list of layers
(:meth:`Plan.offloading`), or from JSON written earlier (:meth:`Plan.from_json`), so a plan
computed offline can be reused without profiling. :meth:`Plan.override` changes it by
layer-name regex, resolved like Keras' ``LayoutMap``: every pattern must fullmatch at least one
layer, and a layer matched by two patterns is an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ralp.errors import RalpError
from ralp.profiler.ps_assignment import spread_layers

WORKER = "worker"  # override value: keep the layer on the workers
PLAN_FORMAT = 1


class PlanError(RalpError, ValueError):
    """The plan does not fit the model or the cluster; the message says what to change."""


def ps_device(task: int, device_type: str = "CPU", device_index: int = 0) -> str:
    """The full device string of PS task ``task`` (always full: partial strings get merged)."""
    return f"/job:ps/replica:0/task:{task}/device:{device_type.upper()}:{device_index}"


@dataclass(frozen=True)
class Plan:
    model_name: str
    num_ps: int
    layers: tuple[str, ...]  # every layer of the model, in forward order
    offloaded: Mapping[str, int] = field(default_factory=dict)  # layer -> PS task
    split_after: str | None = None
    source: str = "manual"  # profiler | manual | json | override
    note: str = ""  # why the plan is what it is (e.g. the profiler's verdict)
    # How workers pull the variables of the layers they keep (ralp.placement.pull_schedule):
    # "default" (ParameterServerStrategy's own), "layer" or "ibatch", and the batches.
    pull_schedule: str = "default"
    pull_batches: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.num_ps, int) or self.num_ps < 1:
            raise PlanError(f"a plan needs at least one PS task, got num_ps={self.num_ps!r}")
        known = set(self.layers)
        unknown = [name for name in self.offloaded if name not in known]
        if unknown:
            raise PlanError(f"the plan offloads layers the model does not have: {unknown}")
        bad = {n: t for n, t in self.offloaded.items() if not 0 <= t < self.num_ps}
        if bad:
            raise PlanError(f"PS tasks out of range 0..{self.num_ps - 1}: {bad}")
        for batch in self.pull_batches:
            wrong = [n for n in batch if n not in known or n in self.offloaded]
            if wrong:
                raise PlanError(f"pull batches name layers the workers do not run: {wrong}")
        # Keep the mapping in forward order and immutable in spirit.
        ordered = {name: self.offloaded[name] for name in self.layers if name in self.offloaded}
        object.__setattr__(self, "offloaded", ordered)

    # ------------------------------------------------------------------ construction

    @classmethod
    def offloading(
        cls, layers: Sequence[str], offloaded: Iterable[str], num_ps: int = 1,
        *, param_bytes: Mapping[str, int] | None = None, model_name: str = "", note: str = "",
    ) -> Plan:
        """Offload ``offloaded`` (spread over ``num_ps`` tasks by ``param_bytes``)."""
        moved = [name for name in layers if name in set(offloaded)]
        missing = sorted(set(offloaded) - set(layers))
        if missing:
            raise PlanError(f"no such layers in the model: {missing}; known: {list(layers)}")
        sizes = [(param_bytes or {}).get(name, 1) for name in moved]
        tasks = spread_layers(moved, sizes, num_ps) if moved else {}
        return cls(model_name, num_ps, tuple(layers), tasks, None, "manual", note)

    @classmethod
    def from_profile(cls, profile, num_ps: int | None = None) -> Plan:
        """The profiler's decision: offload every layer after its split (none if ineligible)."""
        rows = profile.table.rows
        num_ps = profile.ps if num_ps is None else num_ps
        moved = profile.offloaded_layers
        tasks = spread_layers(moved, [profile.table.row(n).param_bytes for n in moved], num_ps)
        return cls(
            profile.model, num_ps, tuple(r.name for r in rows), tasks, profile.split_after,
            "profiler", profile.verdict,
        )

    # ------------------------------------------------------------------ queries

    @property
    def kept(self) -> tuple[str, ...]:
        return tuple(name for name in self.layers if name not in self.offloaded)

    @property
    def is_empty(self) -> bool:
        """Nothing offloaded: training with this plan is plain PS."""
        return not self.offloaded

    def task_of(self, layer: str) -> int | None:
        """The PS task running ``layer``, or None if it runs on the workers."""
        return self.offloaded.get(layer)

    def device_of(self, layer: str, device_type: str = "CPU") -> str | None:
        task = self.task_of(layer)
        return None if task is None else ps_device(task, device_type)

    def check_model(self, layer_names: Iterable[str]) -> None:
        """Raise :class:`PlanError` unless every layer the plan names exists in the model."""
        present = set(layer_names)
        missing = [name for name in self.offloaded if name not in present]
        if missing:
            raise PlanError(
                f"the plan names layers this model does not have: {missing}. The plan was made "
                f"for {self.model_name or 'another model'!r}; re-profile this model or fix the "
                "names with plan.override()."
            )

    # ------------------------------------------------------------------ overrides

    def override(self, rules: Mapping[str, int | str | None]) -> Plan:
        """A new plan with layers re-placed by name regex.

        ``rules`` maps a regex (fullmatched against layer names) to a PS task index, or to
        ``"worker"``/``None`` to keep the matched layers on the workers. A pattern matching no
        layer, or a layer matched by two patterns, is an error.
        """
        offloaded = dict(self.offloaded)
        claimed: dict[str, str] = {}
        for pattern, target in rules.items():
            try:
                regex = re.compile(pattern)
            except re.error as e:
                raise PlanError(f"bad layer pattern {pattern!r}: {e}") from None
            matched = [name for name in self.layers if regex.fullmatch(name)]
            if not matched:
                raise PlanError(
                    f"pattern {pattern!r} matches no layer (patterns must match whole names); "
                    f"layers: {list(self.layers)}"
                )
            for name in matched:
                if name in claimed:
                    raise PlanError(
                        f"layer {name!r} is matched by both {claimed[name]!r} and {pattern!r}; "
                        "make the patterns disjoint"
                    )
                claimed[name] = pattern
                if target is None or target == WORKER:
                    offloaded.pop(name, None)
                elif isinstance(target, int) and not isinstance(target, bool):
                    offloaded[name] = target
                else:
                    raise PlanError(
                        f"pattern {pattern!r}: target must be a PS task index or "
                        f"{WORKER!r}, got {target!r}"
                    )
        return Plan(self.model_name, self.num_ps, self.layers, offloaded, None, "override",
                    f"overrides {dict(rules)} on a plan from {self.source}")

    # ------------------------------------------------------------------ JSON

    def plain(self) -> Plan:
        """The placement alone, as a :class:`Plan` (what a subclass adds, such as
        :class:`StanzaPlan`'s ranks, dropped): what another mode is placed by."""
        return Plan(**{f.name: getattr(self, f.name) for f in fields(Plan)})

    def with_pulls(self, schedule: str, batches) -> Plan:
        """The same plan with the workers' pulls in ``batches`` (lists of layer names)."""
        return replace(self, pull_schedule=schedule,
                       pull_batches=tuple(tuple(b) for b in batches))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "model": self.model_name,
            "num_ps": self.num_ps,
            "split_after": self.split_after,
            "source": self.source,
            "note": self.note,
            "pull_schedule": self.pull_schedule,
            "pull_batches": [list(b) for b in self.pull_batches],
            "layers": [
                {"name": n, "place": "worker" if (t := self.task_of(n)) is None else f"ps:{t}"}
                for n in self.layers
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        try:
            if data.get("format") != PLAN_FORMAT:
                raise PlanError(
                    f"unsupported plan format {data.get('format')!r}; expected {PLAN_FORMAT}"
                )
            layers, offloaded = [], {}
            for entry in data["layers"]:
                layers.append(entry["name"])
                place = entry["place"]
                if place != WORKER:
                    job, _, task = place.partition(":")
                    if job != "ps" or not task.isdigit():
                        raise PlanError(
                            f"layer {entry['name']!r}: place must be 'worker' or 'ps:K', got {place!r}"
                        )
                    offloaded[entry["name"]] = int(task)
            return cls(data.get("model", ""), int(data["num_ps"]), tuple(layers), offloaded,
                       data.get("split_after"), "json", data.get("note", ""),
                       data.get("pull_schedule", "default"),
                       tuple(tuple(b) for b in data.get("pull_batches", ())))
        except (KeyError, TypeError, AttributeError) as e:
            raise PlanError(f"not a ralp plan: missing or malformed field ({e})") from None

    @classmethod
    def from_json(cls, text: str) -> Plan:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise PlanError(f"plan is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise PlanError("a plan is a JSON object")
        return cls.from_dict(data)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Plan:
        try:
            return cls.from_json(Path(path).read_text())
        except OSError as e:
            raise PlanError(f"cannot read plan {str(path)!r}: {e.strerror}") from None

    # ------------------------------------------------------------------ display

    def _pull_lines(self) -> list[str]:
        if not self.pull_batches:
            return []
        spans = [b[0] if len(b) == 1 else f"{b[0]}..{b[-1]}" for b in self.pull_batches]
        return [f"  pulls ({self.pull_schedule}, {len(spans)} batches): " + " | ".join(spans)]

    def __str__(self) -> str:
        head = f"Plan for {self.model_name or 'model'!r}: {self.num_ps} PS task(s), "
        if self.is_empty:
            return "\n".join([head + "nothing offloaded (plain PS)", *self._pull_lines()])
        by_task: dict[int, list[str]] = {}
        for name, task in self.offloaded.items():
            by_task.setdefault(task, []).append(name)
        lines = [head + f"{len(self.offloaded)} layer(s) offloaded"
                 + (f" after {self.split_after!r}" if self.split_after else "")]
        lines.append(
            f"  workers: {len(self.kept)} layers (variables round-robin over the PS tasks)"
        )
        for task in sorted(by_task):
            lines.append(f"  {ps_device(task)}: {', '.join(by_task[task])}")
        return "\n".join([*lines, *self._pull_lines()])


@dataclass(frozen=True)
class StanzaPlan(Plan):
    """A plan as Stanza runs it: the layers it offloads run on the FC ranks, not on PS tasks.

    The CONV ranks (the first ones of the job) run the layers up to the split on their share
    of each batch and allreduce those layers' gradients; each FC rank runs the offloaded
    layers on the activations of its group of CONV ranks and sends them their gradients
    back; the FC ranks' replicas of the offloaded layers apply the same update.
    ``groups[k]``: the CONV ranks FC rank k serves (consecutive, in rank order).
    """

    groups: tuple[tuple[int, ...], ...] = ()

    @classmethod
    def of(cls, plan: Plan, groups: Iterable[Iterable[int]]) -> StanzaPlan:
        """``plan``'s placement run by Stanza, FC rank k serving the CONV ranks ``groups[k]``."""
        return cls(**{f.name: getattr(plan, f.name) for f in fields(Plan)},
                   groups=tuple(tuple(g) for g in groups))

    @property
    def conv_ranks(self) -> tuple[int, ...]:
        return tuple(rank for group in self.groups for rank in group)

    @property
    def fc_ranks(self) -> tuple[int, ...]:
        first = len(self.conv_ranks)
        return tuple(range(first, first + len(self.groups)))

    def __str__(self) -> str:
        conv, fc = self.conv_ranks, self.fc_ranks
        after = f" after {self.split_after!r}" if self.split_after else ""
        lines = [f"Stanza plan for {self.model_name or 'model'!r}: {len(conv)} CONV rank(s), "
                 f"{len(fc)} FC rank(s); {len(self.offloaded)} layer(s) on the FC ranks{after}",
                 f"  CONV {_ranks(conv)}: {len(self.kept)} layers ({_span(self.kept)})"
                 + (", their gradients allreduced among them" if len(conv) > 1 else ""),
                 f"  FC {_ranks(fc)}: {', '.join(self.offloaded)}"
                 + (" (a replica on each, the same update on all)" if len(fc) > 1 else "")]
        lines += [f"  FC rank {rank} <- CONV {_ranks(group)}: their activations in, their "
                  "gradients back" for rank, group in zip(fc, self.groups, strict=True)]
        return "\n".join(lines)


def _ranks(ranks: Sequence[int]) -> str:
    """'rank 2', 'ranks 0-3' (consecutive ranks)."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return f"ranks {ranks[0]}-{ranks[-1]}"


def _span(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"
