"""The CPU cost of a byte in Horovod's ring allreduce on this host (Gloo over TCP, loopback).

The Horovod modes move their bytes with Gloo, not gRPC: a fusion-buffer copy, the kernel's
socket path on both ends and the reduction's sum, without gRPC's serialisation. Its cost per
byte is measured apart from gRPC's (:mod:`lab.planner.transfer`) with the real library: two
ranks started by ``horovodrun`` on loopback all-reduce several sizes, each as the trainers
do (:data:`GROUP_TENSORS` tensors in one grouped, averaged allreduce), and each
reports the CPU time its process used (``time.process_time``: Horovod's background thread
included) per allreduce. ``ring_cpu_s_per_byte`` is the slope of both ranks' CPU time
together against the bytes that cross the ring's links (2 ranks: each sends S / 2 twice, 2 S
in all: the byte model's total for a step).

Run as a module, it is one rank of that measurement (``horovodrun ... python -m
lab.planner.allreduce``); rank 0 prints the figures as one marked JSON line.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

from ralp.errors import RalpError

ALLREDUCE_SIZES = (1024**2, 8 * 1024**2, 32 * 1024**2)  # bytes per tensor
ALLREDUCE_REPEATS = 5
RANKS = 2
MARK = "RALP_ALLREDUCE_COST "
PROBE_TIMEOUT_S = 300.0
# The probes all-reduce a tensor as this many equal parts in one grouped allreduce, as the
# trainers all-reduce a model's gradients (tens to hundreds of tensors): the more tensors,
# the longer the phase (fusion copies in and out, bookkeeping), so a probe of one tensor
# would under-state a training step's ring.
GROUP_TENSORS = 64


class AllreduceProbeError(RalpError, RuntimeError):
    """The probe could not run (Horovod missing, or the job failed): the message says why."""


def horovodrun_path() -> str:
    """``horovodrun`` on PATH, else the one beside this Python."""
    return shutil.which("horovodrun") or os.path.join(os.path.dirname(sys.executable),
                                                      "horovodrun")


def probe_command(sizes: tuple[int, ...], repeats: int) -> list[str]:
    return [horovodrun_path(), "-np", str(RANKS), "-H", f"localhost:{RANKS}", "--gloo",
            sys.executable, "-m", "lab.planner.allreduce",
            ",".join(map(str, sizes)), str(repeats)]


def ring_link_bytes(size: int, ranks: int = RANKS) -> int:
    """Bytes crossing all of a ring allreduce's links for one tensor of ``size`` bytes:
    every rank sends 2 (ranks - 1) / ranks of it."""
    return 2 * (ranks - 1) * size


def run_probe(command: list[str], mark: str, what: str, timeout_s: float):
    """Run a ``horovodrun`` probe ``command`` and return the JSON its rank 0 printed after
    ``mark``; :class:`AllreduceProbeError` names ``what`` failed and why."""
    if not os.path.exists(command[0]):
        raise AllreduceProbeError("horovodrun is not installed (./scripts/setup.sh builds it)")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "-1"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                              env=env)
    except subprocess.TimeoutExpired:
        raise AllreduceProbeError(f"{what} took over {timeout_s:.0f} s") from None
    found = [line.split(mark, 1)[1] for line in done.stdout.splitlines() if mark in line]
    if done.returncode != 0 or not found:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise AllreduceProbeError(f"{what} failed (exit {done.returncode}): {said}")
    return json.loads(found[0])


def measure_allreduce(sizes: tuple[int, ...] = ALLREDUCE_SIZES,
                      repeats: int = ALLREDUCE_REPEATS) -> tuple[float, list]:
    """(ring_cpu_s_per_byte, [(tensor bytes, link bytes, CPU seconds of all ranks)...])."""
    found = run_probe(probe_command(sizes, repeats), MARK, "the allreduce probe", PROBE_TIMEOUT_S)
    points = [tuple(p) for p in found]
    x = np.array([p[1] for p in points], float)
    y = np.array([p[2] for p in points], float)
    return max(0.0, float(np.polyfit(x, y, 1)[0])), points


def timed_allreduces(all_reduce, repeats: int,
                     gap_s: float = 0.0) -> tuple[list[float], list[float]]:
    """Wall and CPU (this process's, every thread) seconds of each of ``repeats`` calls of
    ``all_reduce()``, after two untimed ones (negotiation, buffers and links set up), each
    after ``gap_s`` idle (untimed), as a training step computes between its allreduces."""
    for _ in range(2):
        all_reduce()
    walls, cpus = [], []
    for _ in range(repeats):
        time.sleep(gap_s)
        start, start_cpu = time.perf_counter(), time.process_time()
        all_reduce()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - start_cpu)
    return walls, cpus


def grouped_allreduce(size: int, parts: int = GROUP_TENSORS):
    """A call that all-reduces ``size`` bytes as ``parts`` equal float tensors in one grouped,
    averaged Horovod allreduce in a traced function, as the trainers all-reduce a model's
    gradients (Horovod initialised)."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    tensors = [tf.ones([max(1, size // 4 // parts)], tf.float32) for _ in range(parts)]

    @tf.function
    def grouped(group):
        return hvd.grouped_allreduce(group, op=hvd.Average)

    return lambda: [t.numpy() for t in grouped(tensors)]


def _rank_main(sizes: tuple[int, ...], repeats: int) -> None:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    points = []
    for size in sizes:
        _, cpu = timed_allreduces(grouped_allreduce(size), repeats)
        mine = statistics.median(cpu)
        every = hvd.allgather(tf.constant([mine], tf.float64)).numpy()
        points.append((size, ring_link_bytes(size, hvd.size()), float(every.sum())))
    if hvd.rank() == 0:
        print(MARK + json.dumps(points), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    _rank_main(tuple(int(s) for s in sys.argv[1].split(",")), int(sys.argv[2]))

