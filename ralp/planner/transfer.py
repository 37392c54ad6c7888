"""The cost of moving bytes between two tasks on this host: gRPC over loopback, unshaped.

Two in-process ``tf.distribute.Server``s (a ``ps`` and a ``worker`` job) and a client that
copies tensors of several sizes from the PS task to the worker task. On loopback the link is
not the limit: a transfer costs a fixed time (the wall-clock intercept, ``message_s``) and CPU
time per byte (``cpu_s_per_byte``: serialisation, copies, the kernel's socket path on both
ends). The CPU time is the process's own (``time.process_time``: every thread of the two
servers and the client, which share the process), not the wall time: a transfer's stages run
on several threads at once, and on a shared host what competes with compute is the CPU they
use. Runs in a fresh process: connecting to a cluster changes the process-global eager
context.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from ralp.cluster.fresh_process import run_in_fresh_process

TRANSFER_SIZES = (4 * 1024, 4 * 1024**2, 16 * 1024**2, 64 * 1024**2)  # bytes
TRANSFER_REPEATS = 7


def _measure_in_this_process(sizes: tuple[int, ...], repeats: int) -> list[tuple[int, float]]:
    import portpicker
    import tensorflow as tf

    ports = [portpicker.pick_unused_port() for _ in range(3)]
    cluster = tf.train.ClusterSpec({"ps": [f"localhost:{ports[0]}"],
                                    "worker": [f"localhost:{ports[1]}"],
                                    "chief": [f"localhost:{ports[2]}"]})
    for job in ("ps", "worker"):
        tf.distribute.Server(cluster, job_name=job, task_index=0, start=True)
    tf.config.experimental_connect_to_cluster(cluster, job_name="chief")
    out = []
    for size in sizes:
        with tf.device("/job:ps/replica:0/task:0/device:CPU:0"):
            source = tf.Variable(tf.zeros([size // 4], tf.float32))

        @tf.function
        def pull(v=source):
            with tf.device("/job:worker/replica:0/task:0/device:CPU:0"):
                return tf.reduce_sum(tf.identity(v))  # one copy across, a scalar back

        pull()  # trace and warm up
        times, cpu = [], []
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            pull().numpy()
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        out.append((size, statistics.median(times), statistics.median(cpu)))
    return out


def measure_transfer(sizes: tuple[int, ...] = TRANSFER_SIZES,
                     repeats: int = TRANSFER_REPEATS) -> tuple[float, float, list]:
    """(message_s, cpu_s_per_byte, [(bytes, wall seconds, CPU seconds)...]).

    ``cpu_s_per_byte``: the slope of a least-squares line of CPU time through the sizes.
    ``message_s``: the smallest transfer's wall time less its bytes' share of the wall-time
    line (that line's intercept is too noisy: the big transfers dominate the fit)."""
    points = run_in_fresh_process(_measure_in_this_process, sizes, repeats, timeout=300)
    x = np.array([p[0] for p in points], float)
    wall = np.array([p[1] for p in points], float)
    cpu = np.array([p[2] for p in points], float)
    wall_slope = max(0.0, float(np.polyfit(x, wall, 1)[0]))
    cpu_slope = max(0.0, float(np.polyfit(x, cpu, 1)[0]))
    smallest = int(np.argmin(x))
    return max(0.0, float(wall[smallest] - wall_slope * x[smallest])), cpu_slope, points
