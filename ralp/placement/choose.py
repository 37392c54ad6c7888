"""The plan for a training mode: plain PS, RALP at the profiler's split, or the skewness rule's call.

- ``"ps"``: nothing offloaded (plain ``ParameterServerStrategy``);
- ``"ralp"``: offload every layer after the profiler's best split (or the given plan), even
  if the skewness rule would not; a model with no layers to offload (or a plan that offloads
  none) is refused: it would train as plain PS under the name RALP;
- ``"skewness"``: the paper's rule decides (the profiler's skewness against K); a model with
  nothing worth offloading gets an empty plan and a warning text saying why.

(``"auto"``, the planner's choice from predicted throughput, is resolved above this layer, by
:func:`ralp.wrapping.wrap`, into ``"ps"`` or ``"ralp"``.)

The profile is computed once here, for the cluster the plan is for, and handed on with the
plan (the trainer keeps it; the bench reads its verdict and byte model from it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_THRESHOLD
from ralp.errors import InvalidArgumentError
from ralp.modes import AUTO, PS, RALP, SKEWNESS
from ralp.placement.plan import Plan, PlanError
from ralp.profiler.api import Profile, profile
from ralp.profiler.layer_table import ProfileError, check_model

PLACEMENT_MODES = (SKEWNESS, RALP, PS)


class NothingToOffloadError(PlanError):
    """Mode "ralp" was asked to place a model (or a plan) with no layers to offload.

    Attributes:
        reason: why there is nothing to offload (the profiler's verdict, or the plan's).
    """

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class PlanChoice:
    plan: Plan
    profile: Profile  # of the model at this batch size, for this cluster's workers and PS
    warning: str | None  # why "skewness" fell back to plain PS, else None


def check_placeable(model, mode: str | None = None, plan: Plan | None = None) -> None:
    """Raise :class:`PlanError` for a model that cannot be profiled or placed (say why), and
    :class:`NothingToOffloadError` where ``mode`` is "ralp" and the model (or ``plan``) has
    nothing to offload: cheap checks, made before anything connects."""
    try:
        check_model(model, f"model {getattr(model, 'name', model)!r}")
    except ProfileError as e:
        raise PlanError(str(e)) from None
    if mode == RALP:
        # where the split falls does not depend on the batch or the cluster
        _check_offloads(model, plan, profile(model, DEFAULT_BATCH_SIZE).split)


def choose_plan(
    model,
    mode: str,
    *,
    workers: int,
    num_ps: int,
    plan: Plan | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threshold: float = DEFAULT_THRESHOLD,
) -> PlanChoice:
    """The plan for ``mode`` on a cluster of ``workers`` workers and ``num_ps`` PS tasks."""
    if mode == AUTO:
        raise InvalidArgumentError("mode 'auto' is the planner's choice: call ralp.wrap(model, cluster, "
                         "mode='auto', bandwidth=...) (ralp.wrap), which resolves "
                         "it to 'ps' or 'ralp'")
    if mode not in PLACEMENT_MODES:
        raise InvalidArgumentError(f"mode must be one of {PLACEMENT_MODES}, got {mode!r}")
    p = profile(model, batch_size, threshold=threshold, workers=workers, ps=num_ps)
    names = tuple(r.name for r in p.table.rows)
    if mode == PS:
        empty = Plan(model.name, num_ps, names, {}, None, "manual", "mode 'ps': plain PS")
        return PlanChoice(empty, p, None)
    if plan is not None:
        plan = plan.plain()  # a Stanza trainer's plan places RALP's layers too
        plan.check_model(names)
        if plan.num_ps > num_ps:
            raise PlanError(f"the plan uses {plan.num_ps} PS tasks but the cluster has {num_ps}")
        if mode == RALP:
            _check_offloads(model, plan, p.split)
        return PlanChoice(plan, p, None)
    if mode == RALP:  # forced: the best split, whatever S says
        _check_offloads(model, None, p.split)
        moved = names[p.split.index + 1 :]
        sizes = {r.name: r.param_bytes for r in p.table.rows}
        forced = Plan.offloading(names, moved, num_ps, param_bytes=sizes)
        chosen = Plan(model.name, num_ps, names, forced.offloaded, p.candidate_split_after,
                      "profiler", p.verdict)
        return PlanChoice(chosen, p, None)
    by_rule = Plan.from_profile(p, num_ps)  # mode "skewness": the paper's rule decides
    if by_rule.is_empty:
        return PlanChoice(by_rule, p, f"ralp: {model.name!r} trains on plain PS: {p.verdict}")
    return PlanChoice(by_rule, p, None)


def _check_offloads(model, plan: Plan | None, split) -> None:
    """Mode "ralp" trains RALP or nothing: a model with no admissible split (without a
    ``plan``), or a ``plan`` that offloads no layer, would train plain PS under its name."""
    if plan is not None:
        reason = None if not plan.is_empty else "the plan given offloads no layer"
    else:
        reason = None if split.found else split.reason
    if reason is not None:
        raise NothingToOffloadError(
            f"mode 'ralp' needs layers to offload to the PS, and {model.name!r} has none: "
            f"{reason}. Train it with mode 'ps' (plain parameter-server training) or mode "
            "'auto' (the planner's pick)", reason)
