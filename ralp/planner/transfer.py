"""The cost of moving bytes between two tasks on this host: gRPC over loopback, unshaped.

Two in-process ``tf.distribute.Server``s (a ``ps`` and a ``worker`` job) and a client that
copies tensors of several sizes from the PS task to the worker task. On loopback the link is
not the limit, so the time is what the transfer costs the host: a fixed cost per transfer
(the intercept, ``message_s``) plus CPU time per byte (the slope, ``cpu_s_per_byte``:
serialisation, copies, the kernel's socket path). Runs in a fresh process: connecting to a
cluster changes the process-global eager context.
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
                                    "chief": [f"localhost:{ports[2]}"]})  # fmt: skip
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
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            pull().numpy()
            times.append(time.perf_counter() - start)
        out.append((size, statistics.median(times)))
    return out


def measure_transfer(sizes: tuple[int, ...] = TRANSFER_SIZES,
                     repeats: int = TRANSFER_REPEATS) -> tuple[float, float, list]:  # fmt: skip
    """(message_s, cpu_s_per_byte, [(bytes, seconds)...]): the slope of a least-squares line
    through the sizes, and the smallest transfer's time less its bytes' share (the line's
    intercept is too noisy: the big transfers dominate the fit)."""
    points = run_in_fresh_process(_measure_in_this_process, sizes, repeats, timeout=300)
    x = np.array([p[0] for p in points], float)
    y = np.array([p[1] for p in points], float)
    slope = max(0.0, float(np.polyfit(x, y, 1)[0]))
    smallest = int(np.argmin(x))
    return max(0.0, float(y[smallest] - slope * x[smallest])), slope, points
