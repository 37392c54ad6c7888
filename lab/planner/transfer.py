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
# The per-message probe: the same bytes as one variable and as many, pulled and pushed back.
MESSAGE_COUNTS = (1, 256)
MESSAGE_BYTES = 4 * 1024**2  # in all, split evenly over the variables


def _connect_to_loopback_servers() -> None:
    """Start a ``ps`` and a ``worker`` server in this process and connect it as the chief."""
    import portpicker
    import tensorflow as tf

    ports = [portpicker.pick_unused_port() for _ in range(3)]
    cluster = tf.train.ClusterSpec({"ps": [f"localhost:{ports[0]}"],
                                    "worker": [f"localhost:{ports[1]}"],
                                    "chief": [f"localhost:{ports[2]}"]})
    for job in ("ps", "worker"):
        tf.distribute.Server(cluster, job_name=job, task_index=0, start=True)
    tf.config.experimental_connect_to_cluster(cluster, job_name="chief")


def _measure_in_this_process(sizes: tuple[int, ...], repeats: int) -> list[tuple[int, float]]:
    import tensorflow as tf

    _connect_to_loopback_servers()
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


def pull_and_push_step(total_bytes: int, count: int):
    """A traced step on a connected cluster: ``total_bytes`` in ``count`` variables on ps:0,
    each pulled to worker:0 and an update of it pushed back (an ``assign_sub`` on the PS), as
    a PS step reads and writes its variables; one transfer each way per variable."""
    import tensorflow as tf

    with tf.device("/job:ps/replica:0/task:0/device:CPU:0"):
        params = [tf.Variable(tf.zeros([total_bytes // 4 // count])) for _ in range(count)]

    @tf.function
    def pull_and_push():
        with tf.device("/job:worker/replica:0/task:0/device:CPU:0"):
            updates = [0.5 * tf.identity(v) for v in params]
        with tf.device("/job:ps/replica:0/task:0/device:CPU:0"):
            for v, u in zip(params, updates, strict=True):
                v.assign_sub(u)
        return tf.constant(0)

    return pull_and_push


def _message_points(counts: tuple[int, ...], total_bytes: int,
                    repeats: int) -> list[tuple[int, float]]:
    """In a fresh process: (variables, CPU seconds) of a traced step that pulls ``total_bytes``
    split over that many PS variables to the worker and pushes an update of each back (an
    ``assign_sub`` on the PS), as a PS step reads and writes its variables."""
    _connect_to_loopback_servers()
    out = []
    for count in counts:
        pull_and_push = pull_and_push_step(total_bytes, count)
        pull_and_push()  # trace and warm up
        cpu = []
        for _ in range(repeats):
            start = time.process_time()
            pull_and_push().numpy()
            cpu.append(time.process_time() - start)
        out.append((count, statistics.median(cpu)))
    return out


def measure_message_cpu(counts: tuple[int, ...] = MESSAGE_COUNTS,
                        total_bytes: int = MESSAGE_BYTES,
                        repeats: int = 2 * TRANSFER_REPEATS + 1) -> tuple[float, list]:
    """(cpu_s_per_message, [(variables, CPU seconds)...]): the CPU time one transfer of a
    variable costs beyond its bytes (both ends: TensorFlow's send/recv rendezvous, a gRPC call
    each), from the same bytes moved as one variable and as many, a pull and a push each (the
    slope of a least-squares line of CPU time through the transfers' counts). A model with
    hundreds of variables pays it hundreds of times a step (resnet50 at 75 px: 534 transfers
    per worker batch on plain PS)."""
    points = run_in_fresh_process(_message_points, counts, total_bytes, repeats, timeout=300)
    transfers = np.array([2 * count for count, _ in points], float)
    cpu = np.array([seconds for _, seconds in points], float)
    return max(0.0, float(np.polyfit(transfers, cpu, 1)[0])), points
