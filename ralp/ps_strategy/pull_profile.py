"""iBatch's profiled inputs (Wang et al. 2019), measured: per-layer forward time, a pull's cost.

- Per-layer forward times: each layer of the user's model called on its real inputs for one
  worker's batch, timed in this process before it connects to the cluster (the variables are
  local then; a simulated cluster's workers share this machine's CPU).
- The pull start-up Ts and the link's rate: from a worker, chained reads of tiny PS
  variables (each read waits for the previous one to arrive, as chained pulls do) and the
  read of a 16 MB one, each timed against an empty scheduled function.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from ralp.errors import InvalidArgumentError
from ralp.placement.pull_schedule import (
    SCHEDULES,
    PullProfile,
    ibatch_batches,
    layer_batches,
    pull_and_forward_time,
)

REPEATS = 5
BIG_BYTES = 16 * 1024 * 1024
CHAIN = 8


def layer_forward_times(model, batch_size: int, repeats: int = REPEATS) -> dict[str, float]:
    """Median seconds of each layer's forward pass (``training=True``) on one batch, by name.
    Layers of nested models are timed whole."""
    import keras
    import tensorflow as tf

    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    inputs = [layer.input if isinstance(layer.input, list) else [layer.input] for layer in layers]
    probe = keras.Model(model.inputs, [t for group in inputs for t in group])
    rng = np.random.default_rng(0)
    batch = [rng.uniform(0, 1, (batch_size, *t.shape[1:])).astype(t.dtype) for t in model.inputs]
    values = probe(batch if len(batch) > 1 else batch[0], training=False)
    values = values if isinstance(values, list | tuple) else [values]
    times, k = {}, 0
    for layer, group in zip(layers, inputs, strict=True):
        args = values[k : k + len(group)]
        k += len(group)
        call = tf.function(lambda a, layer=layer: layer(a if len(a) > 1 else a[0], training=True))
        call(args)  # trace and warm up
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            out = call(args)
            tf.nest.map_structure(lambda t: t.numpy(), out)
            samples.append(time.perf_counter() - start)
        times[layer.name] = statistics.median(samples)
    return times


@dataclass(frozen=True)
class LinkCost:
    startup_s: float  # Ts: one chained pull of a few bytes
    bytes_per_s: float  # the rate of one large pull


def measure_link(connection, repeats: int = REPEATS) -> LinkCost:
    """Ts and the rate of pulls from PS task 0 to a worker, measured through the cluster."""
    import tensorflow as tf

    strategy, coordinator = connection.strategy, connection.coordinator
    ps0 = "/job:ps/replica:0/task:0/device:CPU:0"
    with tf.device(ps0):  # created outside the strategy's scope: pinned to PS task 0
        tiny = [tf.Variable(tf.zeros([1]), name=f"ralp_probe_tiny{k}") for k in range(CHAIN)]
        big = tf.Variable(tf.zeros([BIG_BYTES // 4]), name="ralp_probe_big")

    @tf.function
    def nothing():
        return strategy.run(lambda: tf.constant(0.0))

    @tf.function
    def chained():
        def fn():
            out = tf.zeros([1])
            for v in tiny:
                with tf.control_dependencies([out]):
                    out = out + v.read_value()
            return tf.reduce_sum(out)

        return strategy.run(fn)

    @tf.function
    def large():
        return strategy.run(lambda: tf.reduce_sum(big.read_value()))

    def seconds(fn) -> float:
        coordinator.schedule(fn).fetch()  # trace, and warm the worker
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            coordinator.schedule(fn).fetch()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    base = seconds(nothing)
    startup = max((seconds(chained) - base) / CHAIN, 1e-6)
    transfer = max(seconds(large) - base - startup, 1e-6)
    return LinkCost(startup, BIG_BYTES / transfer)


@dataclass(frozen=True)
class PullChoice:
    layer_batches: tuple[tuple[str, ...], ...]  # the workers' layers, batched, forward order
    predicted_s: float | None  # iBatch's model: pull and forward time of one step (ibatch)
    profile: PullProfile | None


def choose_pulls(schedule: str, worker_model, table, forward_times: dict[str, float] | None,
                 connection) -> PullChoice:
    """The batches of ``schedule`` ("layer" or "ibatch") for the layers ``worker_model`` runs
    on the workers; ``table`` is the profiler's layer table (bytes per layer)."""
    names = [layer.name for layer in worker_model.layers]
    param_bytes = dict.fromkeys(names, 0)
    for row in table.rows:  # rows of nested models count towards their top-level layer
        top = row.name.split("/")[0]
        if top in param_bytes:
            param_bytes[top] += row.param_bytes
    if schedule == "layer":
        batches = layer_batches([param_bytes[n] for n in names])
        return PullChoice(tuple(tuple(names[a : b + 1]) for a, b in batches), None, None)
    if schedule != "ibatch":
        raise InvalidArgumentError(f"pull schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    link = measure_link(connection)
    times = forward_times or {}
    profile = PullProfile(tuple(names), tuple(times.get(n, 0.0) for n in names),
                          tuple(param_bytes[n] / link.bytes_per_s for n in names),
                          link.startup_s)
    batches = ibatch_batches(profile)
    return PullChoice(tuple(tuple(names[a : b + 1]) for a, b in batches),
                      pull_and_forward_time(profile, batches), profile)
