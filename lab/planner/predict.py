"""One prediction: a mode's step time and throughput for a workload on a cluster."""

from __future__ import annotations

from dataclasses import dataclass

from lab.planner.device_workload import DeviceWorkload
from lab.planner.ps_step import Compute, Host, images_per_sec, ps_step_time, ralp_step_time
from lab.planner.ring_step import collective_step_time, horovod_step_time
from lab.planner.stanza_step import stanza_step_time
from ralp.defaults import DEFAULT_DEVICE_MEMORY_BYTES
from ralp.planner.modes import PlannerError, resources
from ralp.planner.workload import Workload

# One step-time function per mode, all with the same signature; a mode's (workers, ps)
# resources are in ralp.planner.modes; stanza's n_c / n_f split is searched in the
# recommendation (ralp.planner.recommend), bounded by memory.
STEP_TIME = {
    "ps": ps_step_time,
    "ralp-h": ralp_step_time,
    "ralp-n": ralp_step_time,
    "horovod": horovod_step_time,
    "stanza": stanza_step_time,
    "collective": collective_step_time,
}


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
            bandwidth_bits: int) -> Prediction:
    """``mode`` on ``devices`` devices with every link at ``bandwidth_bits`` bits/s."""
    workers, ps = resources(mode, devices)
    return predict_on(workload, compute, host, mode, workers, ps, bandwidth_bits, devices)


def predict_on(workload: Workload, compute: Compute, host: Host, mode: str, workers: int,
               ps: int, bandwidth_bits: int, devices: int | None = None) -> Prediction:
    """``mode`` on a given cluster shape (``workers`` + ``ps`` tasks, ``devices`` their sum
    unless given): for a cluster the user sized rather than the mode's resource rule."""
    if mode == "collective" and host.collective_cpu_s_per_byte is None and (
            host.shared or host.device_cpus):
        # Its ring's CPU is what sets it apart from Horovod where CPU is scarce; no stand-in
        # is honest (TensorFlow's ring costs about twice Gloo's per byte here).
        raise PlannerError("mode 'collective' on this host needs TensorFlow's ring cost, which "
                           "this calibration lacks: calibrate again (python -m ralp.planner "
                           "--calibrate)")
    links = DeviceWorkload.of(workload).links_on(mode, workers, ps)
    step = STEP_TIME[mode](compute, links, workers, bandwidth_bits / 8, host)
    return Prediction(mode, workers + ps if devices is None else devices, workers, ps,
                      bandwidth_bits, step,
                      images_per_sec(workers, workload.table.batch_size, step))


def predict_stanza(workload: Workload, compute: Compute, host: Host, devices: int,
                   bandwidth_bits: int, memory_bytes: int = DEFAULT_DEVICE_MEMORY_BYTES) -> Prediction:
    """Stanza's best split of ``devices`` into n_c CONV and n_f FC ranks: every n_f from 1 to
    N/2 (no more FC than CONV ranks, as the runtime requires) whose FC rank fits in
    ``memory_bytes`` (:meth:`Workload.fc_rank_bytes` for its group), the fastest predicted."""
    fits = []
    for fc in range(1, devices // 2 + 1):
        conv = devices - fc
        if workload.fc_rank_bytes(-(-conv // fc)) <= memory_bytes:
            fits.append(predict_on(workload, compute, host, "stanza", conv, fc, bandwidth_bits,
                                   devices))
    if not fits:
        raise PlannerError(f"mode 'stanza' on {devices} devices: no FC rank fits in "
                           f"{memory_bytes / 2**30:.3g} GiB (or N < 2)")
    return max(fits, key=lambda p: p.images_per_sec)
