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


def ps_iteration_time(
    workers: int, ps: int, param_bytes: float, bandwidth: float, compute_time: float
) -> float:
    _positive(workers=workers, ps=ps, bandwidth=bandwidth)
    return 2 * workers * param_bytes / (ps * bandwidth) + compute_time


def stanza_iteration_time(
    conv_workers: int,
    fc_workers: int,
    conv_time: float,
    fc_time: float,
    activation_bytes_per_sample: float,
    batch: int,
    conv_param_bytes: float,
    bandwidth: float,
) -> float:
    _positive(conv_workers=conv_workers, fc_workers=fc_workers, bandwidth=bandwidth)
    n_c, n_f = conv_workers, fc_workers
    compute = conv_time + (n_c / n_f) * fc_time
    activations = 2 * n_c * activation_bytes_per_sample * batch / (n_f * bandwidth)
    allreduce = conv_param_bytes * allreduce_rounds(n_c) / bandwidth
    return compute + activations + allreduce


def ralp_iteration_time(
    workers: int,
    conv_time: float,
    fc_time: float,
    activation_bytes_per_sample: float,
    batch: int,
    kept_param_bytes: float,
    bandwidth: float,
) -> float:
    _positive(workers=workers, bandwidth=bandwidth)
    per_worker_bytes = activation_bytes_per_sample * batch + kept_param_bytes
    return conv_time + workers * fc_time + 2 * workers * per_worker_bytes / bandwidth


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
    nodes: int,
    conv_time: float,
    fc_time: float,
    activation_bytes_per_sample: float,
    batch: int,
    conv_param_bytes: float,
    bandwidth: float,
    max_fc_workers: int | None = None,
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
        t = stanza_iteration_time(
            n_c, n_f, conv_time, fc_time, activation_bytes_per_sample, batch,
            conv_param_bytes, bandwidth,
        )  # fmt: skip
        candidate = Assignment(n_c, n_f, t, throughput(n_c, batch, t))
        if best is None or candidate.throughput > best.throughput:
            best = candidate
    assert best is not None
    return best
