"""Plan a real cluster: each mode's layout on nodes of several GPUs, its predicted step
(:mod:`ralp.planner.topology`), and the decision, with ties inside the planner's error band
broken towards the mode that needs less."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from ralp import modes as registry
from ralp.defaults import DEFAULT_DEVICE_MEMORY_BYTES
from ralp.planner.modes import MODES, PlannerError, resources
from ralp.planner.terms import Compute
from ralp.planner.topology import (
    PSLayout,
    SharedCPU,
    StanzaLayout,
    Topology,
    ps_family_step_s,
    ring_step_s,
    shared_cpu_step_s,
    stanza_step_s,
)
from ralp.planner.workload import Workload
from ralp.profiler.bytes_model import variable_homes

# The planner's error on real clusters: every point of the published-cluster validation lies
# inside it (docs/explanation/cost-model.md, tests/planner/test_published_cluster.py).
ERROR_BAND = 0.15
# The one decision rule (docs/explanation/cost-model.md, "The decision"): a mode is chosen over
# one that needs less only when predicted faster by more than this share (a runner-up this
# close is a tie, which the mode needing less takes), and a RALP mode only when it also moves
# at least MIN_BYTES_SAVED fewer bytes than plain PS: placement's gain is the bytes it saves.
DECISION_MARGIN = 0.05
MIN_BYTES_SAVED = 0.05
# What each mode needs beyond TensorFlow, least first: a tie goes to the mode needing least.
NEEDS = {name: mode.needs for name, mode in registry.MODES.items()}


@dataclass(frozen=True)
class ClusterPrediction:
    mode: str
    nodes: int
    gpus_per_node: int
    devices: int
    workers: int  # worker devices (stanza: CONV ranks)
    ps: int  # PS tasks (stanza: FC ranks)
    bandwidth: int  # each node's NIC, bits/s
    images_per_sec: float
    step_time_s: float
    note: str = ""  # how it runs where that matters (a ring through host memory)
    bytes_per_image: float | None = None  # over every link, per image trained

    def to_dict(self) -> dict:
        return asdict(self)


def device_compute(workload: Workload, images_per_sec: float) -> Compute:
    """One device's step at the workload's batch from its measured training throughput,
    split between RALP's head and tail by their forward FLOPs."""
    if images_per_sec <= 0:
        raise PlannerError(f"--device-throughput must be positive, got {images_per_sec}")
    full_s = workload.table.batch_size / images_per_sec
    moved = set(workload.offloaded)
    flops = [(max(0, r.flops), r.name in moved) for r in workload.table.rows]
    total = sum(f for f, _ in flops) or 1
    tail_s = full_s * sum(f for f, tail in flops if tail) / total
    return Compute(full_s, tail_s, head_measured_s=full_s - tail_s)


def scale_compute(compute: Compute, full: float, tail: float) -> Compute:
    """``compute`` with the whole model's step scaled by ``full`` and the tail's by
    ``tail`` (the head keeps the difference)."""
    full_s, tail_s = compute.full_s * full, min(compute.tail_s * tail, compute.full_s * full)
    stacked = None if compute.tail_stacked_s is None else compute.tail_stacked_s * tail
    return replace(compute, full_s=full_s, tail_s=tail_s, tail_stacked_s=stacked,
                   head_measured_s=max(0.0, full_s - tail_s))


def _homed_bytes(workload: Workload, offloaded: dict[str, int], ps: int) -> tuple[float, ...]:
    """Bytes of the variables each of ``ps`` PS tasks holds, less the ``offloaded`` layers'
    (RALP's tail), round-robin in creation order as the byte model places them."""
    homed = [0.0] * ps
    homes = variable_homes(workload.table, offloaded, ps)
    for (row, _, nbytes), home in zip(workload.table.variables, homes, strict=True):
        if row not in offloaded:
            homed[home] += nbytes
    return tuple(homed)


def _tail_layers(workload: Workload, mode: str) -> dict[str, int]:
    """RALP's offloaded layers, each on PS task 0; a model with none cannot run ``mode``."""
    if not workload.offloaded:
        raise PlannerError(f"mode {mode!r} needs layers to offload; "
                           f"{workload.profile.model} has none after its split")
    return {name: 0 for name in workload.offloaded}


def ps_layout(workload: Workload, mode: str, topo: Topology, gpus_per_worker: int = 1,
              ps_tasks: int | None = None, balanced: bool = False,
              tail_s: float = 0.0) -> PSLayout:
    """A PS-family mode's tasks on ``topo``. ``ps``: workers of ``gpus_per_worker`` GPUs
    (ralp runs one per worker task) and ``ps_tasks`` PS tasks (default one per node) on the
    nodes' CPUs, the variables round-robin over them in creation order as
    ``ParameterServerStrategy`` places them (``balanced``: each on the least loaded task,
    largest first, as TensorFlow's ``GreedyLoadBalancingStrategy`` by bytes). RALP (Park et al., 2019): ``ralp-n``
    gives every device but one to workers and that one to the PS (head variables and tail),
    ``ralp-h`` half the devices to workers, spread over the nodes; ``tail_s``: the tail's
    step on the PS."""
    g = topo.gpus_per_node
    if not registry.MODES[mode].offloads:
        if g % gpus_per_worker:
            raise PlannerError(f"{g} GPUs per node do not split into workers of "
                               f"{gpus_per_worker}")
        ps = ps_tasks or topo.nodes
        if balanced:
            greedy = [0.0] * ps
            for nbytes in sorted((v[2] for v in workload.table.variables), reverse=True):
                greedy[greedy.index(min(greedy))] += nbytes
            homed = tuple(greedy)
        else:
            homed = _homed_bytes(workload, {}, ps)
        return PSLayout((g // gpus_per_worker,) * topo.nodes, gpus_per_worker, homed)
    tail = _tail_layers(workload, mode)
    if topo.devices < 2:
        raise PlannerError(f"mode {mode!r} needs at least 2 devices")
    if mode == registry.RALP_N:
        per_node = (g - 1,) + (g,) * (topo.nodes - 1)
    else:
        half = [topo.devices // 2 // topo.nodes] * topo.nodes
        for n in range(topo.devices // 2 - sum(half)):
            half[n] += 1
        per_node = tuple(half)
    return PSLayout(per_node, 1, _homed_bytes(workload, tail, 1),
                    float(workload.profile.boundary_bytes), tail_s)


def task_layout(workload: Workload, mode: str, workers: int, ps: int,
                compute: Compute) -> tuple[PSLayout, Topology]:
    """A PS-family ``mode`` (``ps``, or RALP: ``ralp-n``/``ralp-h``) on a cluster the user
    sized: ``workers`` worker tasks and ``ps`` PS tasks, each on a machine of its own (PS
    tasks on machines 0..ps-1), the kept variables round-robin over the PS tasks and RALP's
    tail on PS task 0. Returns the layout and the topology (NIC rate 1 bit/s: scale it)."""
    offloaded = _tail_layers(workload, mode) if registry.MODES[mode].offloads else {}
    layout = PSLayout((0,) * ps + (1,) * workers, 1, _homed_bytes(workload, offloaded, ps),
                      float(workload.profile.boundary_bytes) if offloaded else 0.0,
                      compute.tail_s if offloaded else 0.0)
    return layout, Topology(ps + workers, 1, 1.0, math.inf)


def predict_on_tasks(workload: Workload, compute: Compute, mode: str, workers: int, ps: int,
                     bandwidth_bits: float | None, sync: str = "async",
                     shared: SharedCPU | None = None) -> ClusterPrediction:
    """:func:`task_layout`'s ``mode`` with every machine's NIC at ``bandwidth_bits``.
    ``shared``: every task on this host's CPUs (a ``ralp.LocalCluster``): each transfer at
    loopback's rate (or ``bandwidth_bits``, if given and slower), and the step no shorter
    than its compute and its bytes' CPU take on the shared cores
    (:func:`ralp.planner.topology.shared_cpu_step_s`)."""
    layout, topo = task_layout(workload, mode, workers, ps, compute)
    if shared is not None:
        bandwidth_bits = min(bandwidth_bits or math.inf, shared.loopback_bits)
    elif bandwidth_bits is None:
        raise PlannerError("a cluster of machines of their own needs its links' rate")
    topo = replace(topo, nic_bits=bandwidth_bits)
    step = ps_family_step_s(compute, layout, topo, sync)
    links = workload.links_on(mode, workers, ps)
    if shared is not None:
        step = max(step, shared_cpu_step_s(compute, workers, links.total,
                                           workers * links.messages, shared))
    batch = workload.table.batch_size
    return ClusterPrediction(mode, topo.nodes, 1, workers + ps, workers, ps,
                             int(bandwidth_bits), workers * batch / step, step, "",
                             links.total / (workers * batch))


def predict_on_devices(workload: Workload, compute: Compute, mode: str, devices: int,
                       bandwidth_bits: float) -> ClusterPrediction:
    """``mode`` as the bench runs it on ``devices`` CPU devices, each a machine of its own
    with its link at ``bandwidth_bits``: the PS family on the bench's split of the devices
    (:func:`ralp.planner.modes.resources`), the rings over every device, Stanza with its best
    split. Raises :class:`PlannerError` where ``mode`` cannot use ``devices``."""
    if registry.MODES[mode].family == registry.PS_FAMILY:
        workers, ps = resources(mode, devices)
        # ralp-h leaves devices idle (half the devices as workers, one PS): N all the same
        return replace(predict_on_tasks(workload, compute, mode, workers, ps, bandwidth_bits),
                       devices=devices)
    topo = Topology(devices, 1, bandwidth_bits, math.inf)
    return predict_mode(workload, compute, topo, mode, horovod_build="gloo", on_gpus=False)


def _stanza(workload: Workload, compute: Compute, topo: Topology, through_host: bool,
            memory_bytes: int) -> tuple[float, int, int]:
    """Stanza's best split of the devices into CONV and FC ranks that fits in memory, the one
    of the highest throughput (CONV ranks' batches per step, not the shortest step: an FC
    rank more can shorten the step yet lose a CONV rank's images): (step, conv, fc)."""
    if not workload.offloaded:
        raise PlannerError(f"mode {registry.STANZA!r} needs layers for its FC ranks; "
                           f"{workload.profile.model} has none after its split")
    tail = workload.tail_trainable_bytes
    head = workload.table.trainable_param_bytes_total - tail
    best = None
    for fc in range(1, topo.devices // 2 + 1):
        conv = topo.devices - fc
        if workload.fc_rank_bytes(-(-conv // fc)) > memory_bytes:
            continue
        layout = StanzaLayout(conv, fc, head, tail, workload.profile.boundary_bytes)
        step = stanza_step_s(compute, layout, topo, through_host)
        if best is None or conv / step > best[1] / best[0]:
            best = (step, conv, fc)
    if best is None:
        raise PlannerError(f"mode {registry.STANZA!r}: no FC rank fits in {memory_bytes / 2**30:.3g} GiB")
    return best


def predict_mode(workload: Workload, compute: Compute, topo: Topology, mode: str, *,
                 sync: str = "async", horovod_build: str | None = "nccl",
                 memory_bytes: int = DEFAULT_DEVICE_MEMORY_BYTES,
                 on_gpus: bool = True) -> ClusterPrediction:
    """``mode`` on ``topo``. ``horovod_build``: the installed Horovod's GPU operations
    ('nccl', or 'gloo': on GPUs, rings through host memory); None: not installed (horovod
    and stanza refused). ``on_gpus`` False: the devices are CPUs, whose gradients are in
    host memory already. Raises :class:`PlannerError` saying why a mode cannot run there."""
    if mode not in MODES:
        raise PlannerError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    batch = workload.table.batch_size
    note = ""
    family = registry.MODES[mode].family
    on_horovod = registry.MODES[mode].on_horovod
    if on_horovod:
        if horovod_build is None:
            raise PlannerError("Horovod is not installed (./scripts/setup.sh builds it)")
        through_host = on_gpus and horovod_build != "nccl"
        note = "Gloo: gradients through host memory" if through_host else ""
    if family == registry.PS_FAMILY:
        layout = ps_layout(workload, mode, topo, tail_s=compute.tail_s)
        step = ps_family_step_s(compute, layout, topo, sync)
        workers, ps = layout.workers, len(layout.homed)
    elif family == registry.LAYER_SPLIT:
        step, workers, ps = _stanza(workload, compute, topo, through_host, memory_bytes)
    else:
        if topo.devices < 2:
            raise PlannerError(f"mode {mode!r} needs at least 2 devices to allreduce")
        step = ring_step_s(compute, workload.table.trainable_param_bytes_total, topo,
                           through_host=on_horovod and through_host)
        workers, ps = topo.devices, 0
    moved = workload.links_on(mode, workers, ps).total / (workers * batch)
    return ClusterPrediction(mode, topo.nodes, topo.gpus_per_node, topo.devices, workers, ps,
                             int(topo.nic_bits), workers * batch / step, step, note, moved)


@dataclass(frozen=True)
class Decision:
    """One setting's answer: ``best`` (the mode to run), ``fastest`` (the highest predicted
    throughput; ``best`` unless a tie went to a mode needing less), ``runner_up``, and
    plain PS for comparison."""

    best: ClusterPrediction
    fastest: ClusterPrediction
    runner_up: ClusterPrediction | None
    ps: ClusterPrediction | None

    @property
    def tie(self) -> bool:
        return self.runner_up is not None and (
            self.runner_up.images_per_sec * (1 + DECISION_MARGIN) >= self.fastest.images_per_sec)


def decide(found: Sequence[ClusterPrediction]) -> Decision:
    """The best of one setting's predictions, by the one decision rule: the fastest, unless
    modes it is not faster than by more than :data:`DECISION_MARGIN` need less
    (:data:`NEEDS`), then the one of those needing least. A RALP mode that does not move
    :data:`MIN_BYTES_SAVED` fewer bytes per image than plain PS is not chosen: its
    prediction differs from plain PS's only by where the tail's compute runs."""
    ps = next((p for p in found if p.mode == registry.PS), None)
    ranked = sorted(found, key=lambda p: -p.images_per_sec)
    eligible = [p for p in ranked if not _saves_too_little(p, ps)] or ranked
    fastest = ranked[0]
    tied = [p for p in eligible
            if p.images_per_sec * (1 + DECISION_MARGIN) >= eligible[0].images_per_sec]
    best = min(tied, key=lambda p: (NEEDS[p.mode][0], -p.images_per_sec))
    others = [p for p in ranked if p is not best]
    return Decision(best, fastest, others[0] if others else None, ps)


def _saves_too_little(p: ClusterPrediction, ps: ClusterPrediction | None) -> bool:
    mode = registry.MODES[p.mode]
    if ps is None or not (mode.offloads and mode.has_ps) \
            or p.bytes_per_image is None or ps.bytes_per_image is None:
        return False
    return p.bytes_per_image >= (1 - MIN_BYTES_SAVED) * ps.bytes_per_image


@dataclass(frozen=True)
class ClusterPlan:
    model: str
    source: str  # the model file or zoo name the plan is for
    batch_size: int
    predictions: tuple[ClusterPrediction, ...]
    skipped: tuple[str, ...]  # a line per mode left out, with the reason
    on_gpus: bool = True  # False: one CPU device per machine (--devices)
    skewness_verdict: str = ""  # the paper's rule, beside the planner's choice

    def best(self) -> list[ClusterPrediction]:
        """The mode to run per (bandwidth, nodes), in input order."""
        return [d.best for d in self.decisions()]

    def decisions(self) -> list[Decision]:
        settings: dict[tuple, list[ClusterPrediction]] = {}
        for p in self.predictions:
            settings.setdefault((p.bandwidth, p.nodes), []).append(p)
        return [decide(found) for found in settings.values()]

    def to_dict(self) -> dict:
        return {"model": self.model, "batch_size": self.batch_size, "decision_margin": DECISION_MARGIN,
                "skewness_verdict": self.skewness_verdict,
                "predictions": [p.to_dict() for p in self.predictions],
                "best": [decision_dict(d) for d in self.decisions()],
                "skipped": list(self.skipped)}


def decision_dict(d: Decision) -> dict:
    return {**d.best.to_dict(), "tie": d.tie, "fastest": d.fastest.mode,
            "runner_up": d.runner_up.mode if d.runner_up else None,
            "vs_runner_up": (d.best.images_per_sec / d.runner_up.images_per_sec
                             if d.runner_up else None),
            "vs_ps": d.best.images_per_sec / d.ps.images_per_sec if d.ps else None}


def installed_horovod() -> str | None:
    """'nccl' or 'gloo' (the installed Horovod's GPU operations), None where not installed."""
    try:
        import horovod.tensorflow as hvd
    except ImportError:
        return None
    return "nccl" if hvd.nccl_built() else "gloo"


def plan_cluster(workload: Workload, images_per_sec: float | None, compute, *,
                 nodes: Sequence[int], gpus_per_node: int, bandwidths: Sequence[int],
                 intra_bits: float, modes: Sequence[str], sync: str,
                 horovod_build: str | None, source: str, on_gpus: bool = True) -> ClusterPlan:
    """Every mode of ``modes`` on every (bandwidth, nodes), the device's compute from its
    measured ``images_per_sec`` or a calibration's ``compute`` (``on_gpus`` False: devices
    that are CPUs, one per machine, with nothing between a device and its host)."""
    if compute is None:
        compute = device_compute(workload, images_per_sec)
    predictions, skipped = [], {}
    for bits in bandwidths:
        for k in nodes:
            topo = Topology(k, gpus_per_node, bits, intra_bits)
            for mode in modes:
                try:
                    predictions.append(predict_mode(workload, compute, topo, mode, sync=sync,
                                                    horovod_build=horovod_build,
                                                    on_gpus=on_gpus))
                except PlannerError as e:
                    skipped.setdefault(mode, f"{mode}: {e}")
    if not predictions:
        raise PlannerError("no mode can run there: " + "; ".join(skipped.values()))
    p = workload.profile
    verdict = (f"{'eligible' if p.eligible else 'not eligible'} (S = {p.skewness:.3f}, "
               f"K = {p.threshold:g})")
    return ClusterPlan(p.model, source, workload.table.batch_size, tuple(predictions),
                       tuple(skipped.values()), on_gpus, verdict)
