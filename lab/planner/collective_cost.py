"""The CPU cost of a byte in TensorFlow's own ring allreduce on this host (mode
``collective``: ``MultiWorkerMirroredStrategy``'s collectives, over gRPC, loopback).

TensorFlow's ring moves a tensor's chunks with gRPC calls between the workers' servers
(protobuf framing and copies on both ends) and sums them: a cost per byte of its own, apart
from a gRPC variable transfer's (:mod:`lab.planner.transfer`) and from Horovod's Gloo ring
(:mod:`lab.planner.allreduce`). It is measured as Horovod's is: two workers started with
their ``TF_CONFIG`` (:func:`ralp.collective.launch.run_workers`) all-reduce tensors of several
sizes, each reports the CPU time its process used per allreduce (``time.process_time``:
TensorFlow's threads included), and ``collective_cpu_s_per_byte`` is the slope of both
workers' CPU time together against the bytes that cross the ring's links (2 S for 2 workers).

Run as a module, it is one worker of that measurement; worker 0 prints the figures as one
marked JSON line.
"""

from __future__ import annotations

import json
import statistics
import sys

import numpy as np

from lab.planner.allreduce import (
    ALLREDUCE_REPEATS,
    ALLREDUCE_SIZES,
    AllreduceProbeError,
    measure_allreduce,
    ring_link_bytes,
    timed_allreduces,
)

MARK = "RALP_COLLECTIVE_COST "
WORKERS = 2
PROBE_TIMEOUT_S = 300.0


def measure_collective(sizes: tuple[int, ...] = ALLREDUCE_SIZES,
                       repeats: int = ALLREDUCE_REPEATS) -> tuple[float, list]:
    """(collective_cpu_s_per_byte, [(tensor bytes, link bytes, CPU seconds of all workers)...]).

    Raises:
        CollectiveError: the probe's workers failed (the failing worker's error).
    """
    from ralp.collective.launch import run_workers
    from ralp.collective.runtime import CollectiveError

    command = [sys.executable, "-m", "lab.planner.collective_cost",
               ",".join(map(str, sizes)), str(repeats)]
    results = run_workers(command, WORKERS, timeout=PROBE_TIMEOUT_S,
                          env={"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "-1"})
    found = [line.split(MARK, 1)[1] for line in results[0].output.splitlines() if MARK in line]
    if not found:
        raise CollectiveError("the collective cost probe printed no figures")
    points = [tuple(p) for p in json.loads(found[0])]
    x = np.array([p[1] for p in points], float)
    y = np.array([p[2] for p in points], float)
    return max(0.0, float(np.polyfit(x, y, 1)[0])), points


def ring_costs() -> tuple[float | None, float | None]:
    """CPU seconds per ring byte of Horovod's Gloo ring and of TensorFlow's own
    (:mod:`lab.planner.collective_cost`); either None, with a warning, where its probe cannot
    run (Horovod missing: gRPC's transfer cost then serves for it)."""
    from ralp.collective.runtime import CollectiveError
    from ralp.errors import warn

    try:
        ring, _ = measure_allreduce()
    except AllreduceProbeError as e:
        warn(f"Horovod's ring cost not measured ({e}); gRPC's serves for it")
        ring = None
    try:
        collective, _ = measure_collective()
    except CollectiveError as e:
        warn(f"TensorFlow's ring cost not measured ({e}); gRPC's serves for it")
        collective = None
    return ring, collective



def sum_all_reduce(strategy):
    """A traced function that sums a tensor over ``strategy``'s workers (TensorFlow's ring)."""
    import tensorflow as tf

    @tf.function
    def all_reduce(tensor):
        mine = strategy.run(tf.identity, args=(tensor,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, mine, axis=None)

    return all_reduce


def _worker_main(sizes: tuple[int, ...], repeats: int) -> None:
    from ralp.collective.runtime import leave_together, make_strategy

    strategy = make_strategy()
    import tensorflow as tf

    all_reduce = sum_all_reduce(strategy)
    points = []
    for size in sizes:
        tensor = tf.ones([size // 4], tf.float32)
        _, cpu = timed_allreduces(lambda t=tensor: all_reduce(t).numpy(), repeats)
        mine = tf.constant([statistics.median(cpu)], tf.float64)
        every = float(all_reduce(mine).numpy()[0])  # both workers' CPU, summed
        points.append((size, ring_link_bytes(size, WORKERS), every))
    rank = int(strategy.cluster_resolver.task_id or 0)
    if rank == 0:
        print(MARK + json.dumps(points), flush=True)
    leave_together(rank, WORKERS)


if __name__ == "__main__":
    _worker_main(tuple(int(s) for s in sys.argv[1].split(",")), int(sys.argv[2]))
    from ralp._compat import exit_without_teardown

    exit_without_teardown()  # TensorFlow's collective server cannot stop cleanly
