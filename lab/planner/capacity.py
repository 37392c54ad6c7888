"""How many single-process training steps this host runs at once: the shared host's capacity.

One TensorFlow process does not fill every core (its ops do not all parallelise, Python and
the runtime's own work sit between them), so a simulated cluster's tasks, sharing the host,
together get more than one process's step rate out of it. The capacity is that gain: the
steps per second of ``processes`` processes training the same model at the same time, over
one process's alone.

The processes must truly run at the same time. Started one by one, each spends seconds
importing, building and tracing while the others already time their steps, so their timed
windows overlap only in part (an earlier measurement here gave 1.0-1.4 where the cluster
shows about 2.2). So every process is forked from the zygote (TensorFlow already imported),
builds and warms up the model, and then waits on a barrier; all start timing together and
count the steps they finish within the same wall-clock window.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ralp.planner.modes import PlannerError

HOST_CAPACITY_PROCESSES = os.cpu_count() or 1  # processes timed together
# The counts the calibration measures: the cores, and twice as many (a simulated cluster
# runs more computing processes than a small host has cores; beyond the cores they contend
# for caches and memory too).
CAPACITY_COUNTS = tuple(sorted({HOST_CAPACITY_PROCESSES, 2 * HOST_CAPACITY_PROCESSES} - {1}))
CAPACITY_WINDOW_S = 8.0  # each process counts its steps over this window, all at once
CAPACITY_WARMUP = 2  # steps before the barrier (tracing, first-step allocation)


@dataclass(frozen=True)
class CapacityRun:
    processes: int
    steps_per_s: tuple[float, ...]  # each process's step rate within the shared window
    started: tuple[float, ...]  # when each began timing (time.time(), after the barrier)

    @property
    def total_steps_per_s(self) -> float:
        return sum(self.steps_per_s)


def _timed_window(barrier, results, model: str, batch_size: int, image_size: int,
                  num_classes: int, window_s: float) -> None:
    """One process: build and warm up the model, wait for all, then count steps in the window."""
    try:
        import keras
        import numpy as np
        import tensorflow as tf

        from ralp.planner.calibration import load_source

        net = load_source(model, num_classes, image_size)
        optimizer = keras.optimizers.SGD(1e-3)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        rng = np.random.default_rng(0)
        x = tf.constant(rng.standard_normal((batch_size, *net.inputs[0].shape[1:])), tf.float32)
        y = tf.constant(rng.integers(0, num_classes, batch_size), tf.int32)

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = loss_fn(y, net(x, training=True))
            optimizer.apply(tape.gradient(loss, net.trainable_variables), net.trainable_variables)
            return loss

        for _ in range(CAPACITY_WARMUP):
            step().numpy()
        barrier.wait(timeout=600)
        started = time.time()
        start = time.perf_counter()
        steps = 0
        while time.perf_counter() - start < window_s:
            step().numpy()
            steps += 1
        results.put(("ok", steps / (time.perf_counter() - start), started))
    except BaseException as e:  # noqa: BLE001 - the parent reports it
        barrier.abort()
        results.put(("error", f"{type(e).__name__}: {e}", 0.0))


def run_together(model: str, batch_size: int, image_size: int, num_classes: int, *,
                 processes: int, window_s: float = CAPACITY_WINDOW_S) -> CapacityRun:
    """``processes`` zygote-forked processes train ``model`` (a zoo name or a saved
    ``.keras`` path: :func:`ralp.planner.calibration.load_source`) in one shared timed
    window."""
    from ralp.cluster.zygote import context, start_process

    ctx = context({"TF_CPP_MIN_LOG_LEVEL": "2"})
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    args = (barrier, results, model, batch_size, image_size, num_classes, window_s)
    started = [ctx.Process(target=_timed_window, args=args, daemon=True) for _ in range(processes)]
    try:
        for p in started:
            start_process(p)
        answers = [results.get(timeout=900) for _ in started]
    finally:
        for p in started:  # stop only what this function started, by its handle (pid)
            if p.pid is None:
                continue  # never started
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    errors = [text for kind, text, _ in answers if kind == "error"]
    if errors:
        raise PlannerError(f"measuring the host's capacity failed: {errors[0]}")
    return CapacityRun(processes, tuple(a[1] for a in answers), tuple(a[2] for a in answers))


def measure_host_capacity(model: str, batch_size: int, image_size: int, num_classes: int, *,
                          processes: int, window_s: float = CAPACITY_WINDOW_S) -> float:
    """Steps per second of ``processes`` processes at once over one process's alone (both
    measured the same way: forked, warmed up, a barrier, a shared window)."""
    [(_, capacity)] = measure_host_capacities(model, batch_size, image_size, num_classes,
                                              counts=(processes,), window_s=window_s)
    return capacity


def measure_host_capacities(model: str, batch_size: int, image_size: int, num_classes: int, *,
                            counts: tuple[int, ...] = CAPACITY_COUNTS,
                            window_s: float = CAPACITY_WINDOW_S) -> tuple[tuple[int, float], ...]:
    """``((processes, capacity), ...)`` for each count: steps per second of that many
    processes at once over one process's alone (one alone measured once for all)."""
    alone = run_together(model, batch_size, image_size, num_classes, processes=1,
                         window_s=window_s).total_steps_per_s
    return tuple(
        (n, run_together(model, batch_size, image_size, num_classes, processes=n,
                         window_s=window_s).total_steps_per_s / alone)
        for n in sorted(counts)
    )
