"""One prediction: a mode's step time and throughput for a workload on a cluster."""

from __future__ import annotations

from dataclasses import dataclass

from ralp.planner.model import STEP_TIME, Compute, Host, images_per_sec
from ralp.planner.modes import resources
from ralp.planner.workload import Workload


@dataclass(frozen=True)
class Prediction:
    mode: str
    devices: int
    workers: int
    ps: int
    bandwidth_bits: int
    step_time_s: float
    images_per_sec: float


def predict(workload: Workload, compute: Compute, host: Host, mode: str, devices: int,
            bandwidth_bits: int) -> Prediction:  # fmt: skip
    """``mode`` on ``devices`` devices with every link at ``bandwidth_bits`` bits/s."""
    workers, ps = resources(mode, devices)
    return predict_on(workload, compute, host, mode, workers, ps, bandwidth_bits, devices)


def predict_on(workload: Workload, compute: Compute, host: Host, mode: str, workers: int,
               ps: int, bandwidth_bits: int, devices: int | None = None) -> Prediction:  # fmt: skip
    """``mode`` on a given cluster shape (``workers`` + ``ps`` tasks, ``devices`` their sum
    unless given): for a cluster the user sized rather than the mode's resource rule."""
    links = workload.links_on(mode, workers, ps)
    step = STEP_TIME[mode](compute, links, workers, bandwidth_bits / 8, host)
    return Prediction(mode, workers + ps if devices is None else devices, workers, ps,
                      bandwidth_bits, step,
                      images_per_sec(workers, workload.table.batch_size, step))  # fmt: skip
