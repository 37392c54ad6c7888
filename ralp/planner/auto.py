"""Mode "auto": the planner's choice among the modes the runtime offers, and why.

``ralp.wrap(model, cluster)`` (mode "auto", its default; :mod:`ralp.wrapping`) and ``python -m
ralp.bench --modes auto`` resolve "auto" once, before anything runs: each candidate mode's throughput is
predicted from a calibration or, for ``ralp.wrap`` without one, from the model's FLOPs at
this host's probed rates (:mod:`ralp.planner.estimate`), and from the byte model, by the
planner's core (:mod:`ralp.planner.topology`), each task on a machine of its own, as
``python -m ralp.planner`` plans, or, where every task of the cluster listens on this host
(a ``ralp.LocalCluster``), all of them on this host's CPUs (:mod:`ralp.planner.loopback`);
the planner's one decision rule chooses. The choice keeps its reasons
(:class:`AutoChoice`): every candidate's predicted images/s, step and bytes, where the compute
figures came from, and the paper's skewness rule's verdict beside it. The rule itself stays
available as mode "skewness".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ralp import modes as registry
from ralp._text import human_bytes
from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_THRESHOLD
from ralp.planner.calibration import Calibration
from ralp.planner.cluster_plan import ClusterPrediction, predict_on_tasks
from ralp.planner.cluster_plan import decide as decide_mode
from ralp.planner.loopback import shares_this_host
from ralp.planner.modes import PlannerError
from ralp.planner.terms import Compute
from ralp.planner.topology import SharedCPU
from ralp.planner.workload import Workload
from ralp.units import parse_bandwidth

ASSUMED_BANDWIDTH = "10gbit"  # the links' rate of machines of their own when none is given

# ralp.wrap's modes on the user's cluster -> the planner's model of each on that shape (RALP
# runs the same step whether the cluster was sized as RALP-H or RALP-N: one PS critical section).
WRAP_CANDIDATES: dict[str, str] = {registry.PS: registry.PS, registry.RALP: registry.RALP_N}


@dataclass(frozen=True)
class TaskLinks:
    """What connects a cluster's tasks, as a prediction takes it: each machine's link rate
    (tc style; None: only loopback's), and where every task shares this host, what its CPUs
    pay for compute and transfers."""

    bandwidth: str | None
    shared: SharedCPU | None = None
    assumed: bool = False  # the rate is ASSUMED_BANDWIDTH, not the user's

    @property
    def bits(self) -> float | None:
        return parse_bandwidth(self.bandwidth) if self.bandwidth else None

    @property
    def words(self) -> str:
        if self.shared is None:
            return f"{self.bandwidth} (assumed: pass bandwidth=)" if self.assumed \
                else str(self.bandwidth)
        cap = f", links at most {self.bandwidth}" if self.bandwidth else ""
        return (f"loopback: every task on this host's {self.shared.cores:g} CPUs, "
                f"{human_bytes(self.shared.bytes_per_s)}/s per transfer{cap}")


def task_links(cluster, bandwidth: str | None) -> TaskLinks:
    """The links of ``cluster``: a cluster whose every task listens on this host shares its
    CPUs (probed once per device, :func:`ralp.planner.rates_cache.shared_host`); machines of
    their own are linked at ``bandwidth``, :data:`ASSUMED_BANDWIDTH` if None. Raises
    :class:`PlannerError` for a rate that does not parse."""
    if bandwidth is not None:
        parse_bandwidth(bandwidth)  # a bad rate fails before anything is measured
    if shares_this_host(cluster):
        from ralp.planner.rates_cache import shared_host

        return TaskLinks(bandwidth, shared_host())
    if bandwidth is None:
        return TaskLinks(ASSUMED_BANDWIDTH, None, assumed=True)
    return TaskLinks(bandwidth)


@dataclass(frozen=True)
class AutoChoice:
    """What "auto" resolved to, and why: the fastest predicted candidate."""

    mode: str  # the chosen mode, as the runtime names it
    devices: int
    bandwidth: str
    predicted_images_per_sec: dict[str, float]  # every candidate, in the order tried
    calibration: str  # where the compute figures came from (file or "measured here") and host
    step_s: dict[str, float] | None = None  # every candidate's predicted step time
    bytes_per_step: dict[str, float] | None = None  # every candidate's bytes over every link
    rule: str | None = None  # the paper's skewness rule's verdict, beside the planner's

    @property
    def why(self) -> str:
        ranked = sorted(self.predicted_images_per_sec.items(), key=lambda kv: -kv[1])
        figures = ", ".join(f"{m} {v:.1f}" + self._detail(m) for m, v in ranked)
        text = (f"auto chose {self.mode}: predicted images/s on {self.devices} devices at "
                f"{self.bandwidth}: {figures} (calibration: {self.calibration})")
        return text + (f"; the skewness rule: {self.rule}" if self.rule else "")

    def _detail(self, mode: str) -> str:
        if not self.step_s or not self.bytes_per_step:
            return ""
        return (f" (step {self.step_s[mode]:.3g} s, "
                f"{human_bytes(self.bytes_per_step[mode])} per step)")

    def to_dict(self) -> dict:
        """The bench record's ``auto`` field."""
        return {"chosen": self.mode, "predicted_images_per_sec": dict(self.predicted_images_per_sec),
                "calibration": self.calibration, "why": self.why, "step_s": self.step_s,
                "bytes_per_step": self.bytes_per_step, "rule": self.rule}


def choose(found: Sequence[ClusterPrediction], bandwidth: str, calibration: str,
           names: dict[str, str] | None = None) -> AutoChoice:
    """The mode to run among ``found`` (one setting's predictions): the planner's decision
    (:func:`ralp.planner.cluster_plan.decide`: the fastest, a tie inside the decision margin
    going to the mode that needs least). ``names`` maps a prediction's mode to the runtime's name of
    it (``ralp.wrap``: ralp-n -> ralp)."""
    if not found:
        raise PlannerError("auto has no candidate mode to choose from on this cluster")
    if len({(p.devices, p.bandwidth) for p in found}) != 1:
        raise PlannerError("auto chooses within one setting (devices, bandwidth) at a time")
    names = names or {}
    best = decide_mode(found).best
    return AutoChoice(names.get(best.mode, best.mode), best.devices, bandwidth,
                      {names.get(p.mode, p.mode): p.images_per_sec for p in found},
                      calibration, step_s={names.get(p.mode, p.mode): p.step_time_s
                                           for p in found})


def describe(calibration: Calibration, source: str) -> str:
    """The calibration, as a choice cites it: its source and the machine it was measured on."""
    return f"{source}, {calibration.machine or 'unknown machine'}"


def choose_for_cluster(model, cluster, bandwidth: str | None,
                       calibration: Calibration | str, *,
                       batch_size: int = DEFAULT_BATCH_SIZE,
                       threshold: float = DEFAULT_THRESHOLD) -> AutoChoice:
    """Plain PS or RALP for ``model`` on ``cluster`` (its own workers and PS tasks; its
    links by :func:`task_links`), from ``calibration`` (a :class:`Calibration` or a
    calibration JSON path). A calibration lacking this model is completed here, on its host
    description."""
    import keras

    from ralp.planner.api import calibrate_entry, shape_facts
    from ralp.profiler.api import profile

    links = task_links(cluster, bandwidth)
    image, classes = shape_facts(model)
    if isinstance(calibration, (str, Path)):
        cal, source = Calibration.load(calibration), str(calibration)
    else:
        cal, source = calibration, "given"
    try:
        entry = cal.find(model.name, batch_size, image, classes)
    except PlannerError:
        # Timing trains: a clone (same layers, fresh weights) keeps the user's weights.
        entry = calibrate_entry(keras.models.clone_model(model), batch_size)
        cal = replace(cal, entries=[*cal.entries, entry])
        source += f" (+ {model.name} measured here)"
    workload = Workload(profile(model, batch_size, threshold=threshold))
    return choose_on_tasks(workload, entry.compute, cluster, links, describe(cal, source))


def choose_on_tasks(workload: Workload, compute: Compute, cluster, links: TaskLinks,
                    source: str) -> AutoChoice:
    """Plain PS or RALP on ``cluster``'s workers and PS tasks, by the planner's one decision
    rule (:func:`ralp.planner.cluster_plan.decide`): RALP where it is predicted faster by
    more than the decision margin and moves enough fewer bytes, plain PS where nothing lies
    after a split to place. The choice keeps every candidate's
    predicted step and bytes and the skewness rule's verdict beside it."""
    workers, ps = len(cluster.workers), len(cluster.ps)
    candidates = WRAP_CANDIDATES if workload.offloaded else {registry.PS: registry.PS}
    found = [predict_on_tasks(workload, compute, planned, workers, ps, links.bits,
                              shared=links.shared)
             for planned in candidates.values()]
    moved = {planned: float(workload.links_on(planned, workers, ps).total)
             for planned in candidates.values()}
    best = decide_mode(found).best
    names = {planned: mode for mode, planned in candidates.items()}
    return AutoChoice(names[best.mode], workers + ps, links.words,
                      {names[p.mode]: p.images_per_sec for p in found}, source,
                      step_s={names[p.mode]: p.step_time_s for p in found},
                      bytes_per_step={names[m]: b for m, b in moved.items()},
                      rule=workload.profile.verdict)


def estimate_for_cluster(model, cluster, bandwidth: str | None = None, *,
                         batch_size: int = DEFAULT_BATCH_SIZE,
                         threshold: float = DEFAULT_THRESHOLD) -> AutoChoice:
    """``ralp.wrap``'s default decision, with no calibration and no cluster run: the model's
    compute estimated from its FLOPs at rates a probe of this device measures in about a
    second (:mod:`ralp.planner.estimate`), its bytes from the profiler, its links by
    :func:`task_links`."""
    from ralp.planner.estimate import estimate_compute
    from ralp.planner.rates_cache import device_rates
    from ralp.profiler.api import profile

    links = task_links(cluster, bandwidth)
    workload = Workload(profile(model, batch_size, threshold=threshold))
    rates = device_rates()
    compute = estimate_compute(workload.table, workload.offloaded, rates)
    probed = (f"{rates.probe_s:.1f} s probe, kept from {_age(rates.measured_at)} ago"
              if rates.cached else f"{rates.probe_s:.1f} s probe")
    source = f"estimated from the model's FLOPs at this host's rates ({probed})"
    return choose_on_tasks(workload, compute, cluster, links, source)


def _age(measured_at: float) -> str:
    import time

    minutes = max(0.0, time.time() - measured_at) / 60
    return f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.0f} h"
