"""The planner's cost model for a real cluster: nodes of several GPUs that share one NIC,
with a faster link inside each node. One step formula per mode family, pure functions of
the byte model's bytes, one device's compute and the topology (no TensorFlow).

Units: seconds, bytes, bytes per second. A *step* is one batch on every worker device, so
throughput = worker devices x batch / step time. Every link is full duplex: a NIC carries
its in and out bytes at the same time, each at the NIC's rate.

Families (docs/explanation/cost-model.md, "A real cluster"):

- **PS** (``ps``, ``ralp-h``, ``ralp-n``): each worker pulls the variables it keeps, runs
  its forward pass, (RALP) sends the boundary activations to the tail on the PS and gets
  their gradients back, and runs its backward pass, pushing each layer's gradients as soon
  as they are computed. Pulls are exposed; pushes hide behind the backward pass as far as
  it lasts (:func:`ralp.planner.terms.behind_backward_s`, :func:`ps_family_step_s`). Synchronous (``bsp``) workers move in step, so a
  node's NIC carries every worker's phase at once; asynchronous workers spread out and the
  step is the longer of a worker's step alone and the busiest shared resource's load.
- **Ring** (``horovod``, ``collective``): every GPU runs the whole model and ring-allreduces
  each gradient as its backward pass produces it, crossing each node's NIC once per
  direction; the reductions hide behind the backward pass by the PS family's rule
  (:func:`ring_step_s`). A ring that goes through host memory (Horovod built with Gloo
  only) also copies each gradient to the host and back over the GPU's link.
- **Stanza**: CONV ranks run the head, FC ranks run the tail on their group's stacked
  batches, one phase after another; the head's ring hides behind the heads' backward pass
  by the same rule (:func:`stanza_step_s`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ralp import modes as registry
from ralp.planner.modes import PlannerError
from ralp.planner.terms import Compute, behind_backward_s, forward_backward_s

# PCIe 3.0 x16: 985 MB/s per lane each way (PCI-SIG's PCIe 3.0 base specification), the link
# most GPUs of a node reach each other and the host through when nothing faster is given.
PCIE3_X16_BITS = 16 * 985 * 10**6 * 8


@dataclass(frozen=True)
class Topology:
    """``nodes`` machines of ``gpus_per_node`` devices, each node's NIC at ``nic_bits``
    bits/s each way and each device's link inside its node at ``intra_bits``."""

    nodes: int
    gpus_per_node: int
    nic_bits: float
    intra_bits: float = PCIE3_X16_BITS

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise PlannerError(f"a cluster needs at least one node of one GPU, got "
                               f"{self.nodes} x {self.gpus_per_node}")
        if self.nic_bits <= 0 or self.intra_bits <= 0:
            raise PlannerError("a cluster's bandwidths must be positive")

    @property
    def devices(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def nic(self) -> float:  # bytes/s
        return self.nic_bits / 8

    @property
    def intra(self) -> float:  # bytes/s
        return self.intra_bits / 8


@dataclass(frozen=True)
class SharedCPU:
    """Every task on one host's ``cores`` (a ``ralp.LocalCluster``): no wire limits a step,
    the tasks reach each other over loopback, and every byte and tensor they move costs CPU
    at both ends on the cores that also compute (:mod:`ralp.planner.loopback` probes it).
    ``step_cores``: how many cores one task's training step keeps busy; ``bytes_per_s``: one
    transfer's rate over loopback."""

    cores: float
    step_cores: float
    cpu_s_per_byte: float  # gRPC's CPU, both ends, per byte moved between two tasks
    cpu_s_per_transfer: float  # the same per tensor moved, beyond its bytes
    bytes_per_s: float
    probe_s: float = 0.0  # how long the probe took
    measured_at: float = 0.0  # when (time.time()); 0: not recorded
    cached: bool = False  # kept from an earlier probe (ralp.planner.rates_cache)

    @property
    def loopback_bits(self) -> float:
        return 8 * self.bytes_per_s


def shared_cpu_step_s(compute: Compute, workers: int, moved_bytes: float, transfers: float,
                      host: SharedCPU) -> float:
    """The shortest step the shared host's cores allow: every worker's batch computed (at
    ``host.step_cores`` busy cores for ``compute.full_s``: RALP's tail on the PS task is the
    same work on the same cores) and ``moved_bytes`` and ``transfers`` (all workers' pulls,
    pushes and boundary exchanges of one step) serialised at both ends, over ``host.cores``."""
    work = (workers * compute.full_s * host.step_cores + moved_bytes * host.cpu_s_per_byte
            + transfers * host.cpu_s_per_transfer)
    return work / host.cores


@dataclass(frozen=True)
class PSLayout:
    """Where a PS-family job's tasks sit. ``workers_per_node[n]``: worker tasks on node
    ``n``, each of ``gpus_per_worker`` GPUs whose gradients it sums inside the node before
    pushing; ``homed[p]``: bytes of the kept variables on PS task ``p``, which runs on node
    ``p`` (one PS task per node, as TensorFlow's benchmarks place them). ``boundary_bytes``:
    activations a RALP worker sends per worker batch (their gradients come back as many);
    ``tail_s``: the tail's compute per worker batch, in the PS task's critical section."""

    workers_per_node: tuple[int, ...]
    gpus_per_worker: int
    homed: tuple[float, ...]
    boundary_bytes: float = 0.0
    tail_s: float = 0.0

    @property
    def workers(self) -> int:
        return sum(self.workers_per_node)

    @property
    def kept_bytes(self) -> float:
        return sum(self.homed)


def _busiest_nic_bytes(layout: PSLayout) -> float:
    """The busiest NIC direction's bytes in one phase in which every worker pulls (or
    pushes) every kept variable: a node's workers reach the remote PS tasks, its PS task
    serves the remote workers."""
    busiest = 0.0
    total = layout.kept_bytes
    for node, local in enumerate(layout.workers_per_node):
        homed_here = layout.homed[node] if node < len(layout.homed) else 0.0
        remote_workers = layout.workers - local
        out = remote_workers * homed_here
        into = local * (total - homed_here)
        busiest = max(busiest, out, into)
    return busiest


def ps_family_step_s(compute: Compute, layout: PSLayout, topo: Topology,
                     sync: str = "async") -> float:
    """A PS-family step (``ps``: no boundary, no tail; RALP: the head on the workers, the
    tail on PS task 0). Phases of one worker batch: the pulls (over the NIC, then each GPU's
    link), the forward pass, RALP's exchange with its tail, the backward pass with the
    pushes behind it (each GPU's link, then the NIC).

    ``bsp``: every worker in step, so each phase's bytes are every worker's at once on the
    busiest NIC direction, and the tail serves every worker's batch in turn. ``async``: a
    worker's step alone (its node's NIC shared by that node's workers), or the busiest NIC
    direction's bytes of a whole round, or the PS task's tails of a round, the longest."""
    if sync not in ("async", "bsp"):
        raise PlannerError(f"sync {sync!r}: choose 'async' or 'bsp'")
    head_s = compute.head_s if layout.boundary_bytes else compute.full_s
    forward_s, backward_s = forward_backward_s(head_s)
    gpu_link_s = layout.kept_bytes / topo.intra if topo.devices > 1 else 0.0
    moving = _busiest_nic_bytes(layout) / topo.nic
    remote = layout.workers - layout.workers_per_node[0]
    if sync == "bsp":
        exchange_s = 0.0
        if layout.boundary_bytes:  # every worker's activations in, the tail in turns, back
            exchange_s = (max(layout.workers * layout.tail_s,
                              remote * layout.boundary_bytes / topo.nic)
                          + 2 * layout.boundary_bytes / topo.nic)
        push_s = moving + gpu_link_s
        return (moving + gpu_link_s + forward_s + exchange_s
                + behind_backward_s(backward_s, push_s))
    busiest_node = max(layout.workers_per_node)
    alone_nic = busiest_node * layout.kept_bytes / topo.nic
    exchange_s = (2 * busiest_node * layout.boundary_bytes / topo.nic + layout.tail_s
                  if layout.boundary_bytes else 0.0)
    alone = (alone_nic + gpu_link_s + forward_s + exchange_s
             + behind_backward_s(backward_s, alone_nic + gpu_link_s))
    # a round of every worker's batch: each direction of the busiest NIC carries the pulls
    # or the pushes of the variables and, at the PS's node, the activations or their
    # gradients of every remote worker
    round_s = 2 * moving + remote * layout.boundary_bytes / topo.nic
    return max(alone, round_s, layout.workers * layout.tail_s)


def ring_allreduce_s(nbytes: float, ranks: int, topo: Topology) -> float:
    """One ring allreduce of ``nbytes`` over ``ranks`` devices laid out node by node: each
    rank sends 2 (ranks - 1) / ranks of it; the ring's slowest hop is a NIC where it spans
    several nodes, else a device's link inside the node."""
    if ranks < 2 or nbytes <= 0:
        return 0.0
    spans_nodes = ranks > topo.gpus_per_node
    rate = min(topo.nic, topo.intra) if spans_nodes else topo.intra
    return 2 * (ranks - 1) / ranks * nbytes / rate


def host_copy_s(nbytes: float, topo: Topology) -> float:
    """A ring through host memory: each device copies its gradients to the host and the
    result back over its own link."""
    return 2 * nbytes / topo.intra


def ring_step_s(compute: Compute, gradient_bytes: float, topo: Topology,
                through_host: bool = False) -> float:
    """Every device runs the whole model and allreduces each gradient as its backward pass
    produces it: the ring (and a host ring's copies) hides behind the backward pass as the
    PS family's pushes do (:func:`ralp.planner.terms.behind_backward_s`)."""
    copies = host_copy_s(gradient_bytes, topo) if through_host else 0.0
    forward_s, backward_s = forward_backward_s(compute.full_s)
    return forward_s + behind_backward_s(
        backward_s, ring_allreduce_s(gradient_bytes, topo.devices, topo) + copies)


@dataclass(frozen=True)
class StanzaLayout:
    """``conv`` CONV ranks and ``fc`` FC ranks (one device each, FC ranks on separate nodes
    where there are enough); ``head_bytes`` and ``tail_bytes``: the trainable bytes each
    group allreduces; ``boundary_bytes``: one CONV rank's activations per batch."""

    conv: int
    fc: int
    head_bytes: float
    tail_bytes: float
    boundary_bytes: float

    @property
    def group(self) -> int:
        return math.ceil(self.conv / self.fc)


def stanza_step_s(compute: Compute, layout: StanzaLayout, topo: Topology,
                  through_host: bool = False) -> float:
    """Stanza's phases one after another: the heads' forward pass, the exchange (a group's
    activations into its FC rank's NIC and their gradients out), the tail on the group's
    stacked batches, then the heads' backward pass with the head's ring (and a host ring's
    copies) behind it (:func:`ralp.planner.terms.behind_backward_s`) beside what the tail's
    ring, behind the tail's backward pass by the same rule, has left; the slower counts."""
    per_node = max(1, math.ceil(layout.fc / topo.nodes))
    exchange_s = 2 * per_node * layout.group * layout.boundary_bytes / topo.nic
    if topo.nodes == 1:
        exchange_s = 2 * layout.group * layout.boundary_bytes / topo.intra
    copies = host_copy_s(layout.head_bytes, topo) if through_host else 0.0
    forward_s, backward_s = forward_backward_s(compute.head_s)
    heads = behind_backward_s(backward_s,
                              ring_allreduce_s(layout.head_bytes, layout.conv, topo) + copies)
    tail_s = compute.tail_group_s(layout.group)
    tail_backward_s = forward_backward_s(tail_s)[1]
    tail_ring = behind_backward_s(
        tail_backward_s, ring_allreduce_s(layout.tail_bytes, layout.fc, topo)) - tail_backward_s
    return forward_s + exchange_s + tail_s + max(heads, tail_ring)


def compute_step_s(compute: Compute, mode: str, workers: int, ps: int,
                   sync: str = "async") -> float:
    """``mode``'s step with every link infinitely fast: its compute alone on ``workers``
    workers and ``ps`` PS tasks (stanza: CONV and FC ranks), each a device of its own, by
    the family's own formula. The bound a measured step is read against, beside the busiest
    link's wire time."""
    family = registry.MODES[mode].family
    if family == registry.ALLREDUCE:
        return ring_step_s(compute, 0.0, Topology(max(workers, 1), 1, math.inf, math.inf))
    if family == registry.LAYER_SPLIT:
        layout = StanzaLayout(workers, ps, 0.0, 0.0, 0.0)
        return stanza_step_s(compute, layout, Topology(workers + ps, 1, math.inf, math.inf))
    tail = registry.MODES[mode].offloads
    # any boundary bytes mark RALP's exchange; at an infinite rate they cost nothing
    layout = PSLayout((0,) * ps + (1,) * workers, 1, (0.0,) * ps, 1.0 if tail else 0.0,
                      compute.tail_s if tail else 0.0)
    return ps_family_step_s(compute, layout, Topology(ps + workers, 1, math.inf, math.inf),
                            "bsp" if sync == "bsp" else "async")
