"""Per-iteration time and throughput models (BRIEF §5), pure functions of measured inputs.

Units: bytes, bytes per second, seconds, samples. ``batch`` is the per-worker batch (K).
The models add compute and communication (no overlap), as the Stanza model does; later
stages calibrate the inputs (compute times, effective bandwidth) from measurements.

- Plain PS:  t = 2 * W * P / (M * B) + T       (every parameter in and out of the PS links)
- Stanza:    t = T_c + (n_c / n_f) * T_f + 2 * n_c * A * K / (n_f * B) + P_c * rounds(n_c) / B
- RALP (this product: conv parameters still go through the PS, one PS holds the FC part):
             t = T_c + W * T_f + 2 * W * (A * K + P_c) / B
  The PS runs each worker's FC part in turn (the consistency rule of BRIEF §3) and its link
  carries each worker's boundary activations, their gradients and the kept parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")


def allreduce_rounds(n: int) -> int:
    """Rounds of recursive-doubling allreduce among n nodes (log2 n; floor(log2 n) + 2 else)."""
    if n < 1:
        raise ValueError(f"need at least one node, got {n}")
    if n == 1:
        return 0
    log = math.log2(n)
    return int(log) if log.is_integer() else int(math.floor(log)) + 2


@dataclass(frozen=True)
class SplitWorkload:
    """One worker's batch of a model split into a conv part and an FC part (measured inputs).

    ``conv_time``/``fc_time``: seconds for one worker's batch through each part;
    ``activation_bytes_per_sample``: the boundary activations (A); ``conv_param_bytes``: the
    parameters that stay with the workers (P_c).
    """

    conv_time: float
    fc_time: float
    activation_bytes_per_sample: float
    batch: int
    conv_param_bytes: float

    @property
    def activation_bytes(self) -> float:
        """A x K: the boundary activations of one worker's batch."""
        return self.activation_bytes_per_sample * self.batch


def ps_iteration_time(
    workers: int, ps: int, param_bytes: float, bandwidth: float, compute_time: float
) -> float:
    _positive(workers=workers, ps=ps, bandwidth=bandwidth)
    return 2 * workers * param_bytes / (ps * bandwidth) + compute_time


def stanza_iteration_time(
    conv_workers: int, fc_workers: int, work: SplitWorkload, bandwidth: float
) -> float:
    _positive(conv_workers=conv_workers, fc_workers=fc_workers, bandwidth=bandwidth)
    n_c, n_f = conv_workers, fc_workers
    compute = work.conv_time + (n_c / n_f) * work.fc_time
    activations = 2 * n_c * work.activation_bytes / (n_f * bandwidth)
    allreduce = work.conv_param_bytes * allreduce_rounds(n_c) / bandwidth
    return compute + activations + allreduce


def ralp_iteration_time(workers: int, work: SplitWorkload, bandwidth: float) -> float:
    _positive(workers=workers, bandwidth=bandwidth)
    per_worker_bytes = work.activation_bytes + work.conv_param_bytes
    return work.conv_time + workers * work.fc_time + 2 * workers * per_worker_bytes / bandwidth


def throughput(workers: int, batch: int, iteration_time: float) -> float:
    """Samples per second across all workers."""
    _positive(iteration_time=iteration_time)
    return workers * batch / iteration_time


@dataclass(frozen=True)
class Assignment:
    conv_workers: int
    fc_workers: int
    iteration_time: float
    throughput: float


def best_stanza_assignment(
    nodes: int, work: SplitWorkload, bandwidth: float, max_fc_workers: int | None = None
) -> Assignment:
    """Exhaustive search over n_c + n_f = nodes for the highest modelled throughput.

    ``max_fc_workers`` bounds n_f (e.g. by how many nodes can hold the FC part in memory).
    """
    if nodes < 2:
        raise ValueError("Stanza needs at least two nodes: one CONV worker and one FC worker")
    limit = nodes - 1 if max_fc_workers is None else min(max_fc_workers, nodes - 1)
    best: Assignment | None = None
    for n_f in range(1, limit + 1):
        n_c = nodes - n_f
        t = stanza_iteration_time(n_c, n_f, work, bandwidth)
        candidate = Assignment(n_c, n_f, t, throughput(n_c, work.batch, t))
        if best is None or candidate.throughput > best.throughput:
            best = candidate
    assert best is not None
    return best
