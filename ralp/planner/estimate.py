"""A model's compute estimated from its FLOPs at this device's measured rates: the planner's
inputs without a calibration, in about half a second.

A calibration times real training steps of the model (seconds to minutes). ``ralp.wrap``'s
default decision must not cost that, so here the profiler's FLOPs per layer (forward, per
sample; a training step is taken as three times the forward pass: forward, and the backward
pass's two products) are divided by rates this device reaches on layers of each kind, measured
by a probe of a few small training steps (:func:`probe`), plus a fixed cost per layer (the
framework's per-op overhead, which dominates small layers). The estimate is coarse: it serves
to tell a network-bound placement decision, where bytes dominate, not to predict a step to
10%.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from ralp.planner.terms import Compute
from ralp.profiler.layer_table import LayerTable

TRAIN_FLOPS_PER_FORWARD = 3  # forward + backward (input and weight gradients)
# the probe's timing loops stop after this long in all (its tracing comes on top): the
# shortest budget whose rates stay inside the spread of longer ones
PROBE_BUDGET_S = 0.15
STACK = 3  # tiny layers in the stack that times a layer's fixed cost (each one adds tracing)


@dataclass(frozen=True)
class DeviceRates:
    """What this device computes per second, by layer kind, and a layer's fixed cost."""

    conv_flops_per_s: float
    fc_flops_per_s: float
    other_flops_per_s: float  # element-wise layers (activations, pools, norms): memory-bound
    per_layer_s: float
    probe_s: float = 0.0  # how long the probe took
    measured_at: float = 0.0  # when (time.time()); 0: not recorded
    cached: bool = False  # kept from an earlier probe (ralp.planner.rates_cache)

    def layer_s(self, kind: str, flops: float) -> float:
        rate = {"conv": self.conv_flops_per_s, "fc": self.fc_flops_per_s}.get(
            kind, self.other_flops_per_s)
        return TRAIN_FLOPS_PER_FORWARD * flops / rate + self.per_layer_s


def estimate_compute(table: LayerTable, offloaded: tuple[str, ...] | list[str],
                     rates: DeviceRates) -> Compute:
    """The whole model's, the tail's and the head's step on one worker batch, from FLOPs."""
    batch = table.batch_size
    moved = set(offloaded)
    full = tail = 0.0
    for row in table.rows:
        seconds = rates.layer_s(row.kind, row.flops * batch)
        full += seconds
        if row.name in moved:
            tail += seconds
    return Compute(full, tail, head_measured_s=full - tail)


def probe(budget_s: float = PROBE_BUDGET_S, stack: int = STACK) -> DeviceRates:
    """Time small training steps of a convolution, a dense layer and an element-wise layer
    in this process (traced once each), and of a stack of ``stack`` tiny dense layers for the
    fixed cost of a layer, and derive the rates.

    The layers are the TensorFlow ops a Keras layer runs in a traced step (a convolution or a
    matrix product, then a bias added; a ReLU), on variables of their own: Keras would run the
    same kernels, but building and tracing its layers took a third of the probe.
    """
    started = time.perf_counter()
    cases = {
        "conv": (_conv_layer(64, 64), (8, 32, 32, 64), 2 * 9 * 64 * 64 * 32 * 32),
        "fc": (_dense_layer(2048, 1024), (8, 2048), 2 * 2048 * 1024),
        "other": (_relu_layer(), (8, 64, 64, 64), 64 * 64 * 64),
    }
    one = _timed_step(_dense_stack(1), (8, 4), budget_s / 8)
    stacked = _timed_step(_dense_stack(stack), (8, 4), budget_s / 8)
    per_layer = max(0.0, (stacked - one) / (stack - 1))
    rates = {}
    for kind, (layer, shape, flops_per_sample) in cases.items():
        seconds = max(_timed_step(layer, shape, budget_s / 4) - one, 1e-6)
        rates[kind] = TRAIN_FLOPS_PER_FORWARD * flops_per_sample * shape[0] / seconds
    return DeviceRates(rates["conv"], rates["fc"], rates["other"], per_layer,
                       time.perf_counter() - started)


class _Layer(NamedTuple):
    """What the probe times: a forward pass and the variables its gradients are taken of."""

    forward: Callable
    variables: list


def _conv_layer(channels_in: int, filters: int) -> _Layer:
    """A 3x3 same-padded convolution with a bias, as ``keras.layers.Conv2D`` runs it."""
    import tensorflow as tf

    kernel = tf.Variable(tf.random.normal((3, 3, channels_in, filters), stddev=0.05))
    bias = tf.Variable(tf.zeros((filters,)))
    return _Layer(lambda x: tf.nn.conv2d(x, kernel, 1, "SAME") + bias, [kernel, bias])


def _dense_layer(units_in: int, units: int) -> _Layer:
    """A matrix product and a bias, as ``keras.layers.Dense`` runs it."""
    import tensorflow as tf

    kernel = tf.Variable(tf.random.normal((units_in, units), stddev=0.05))
    bias = tf.Variable(tf.zeros((units,)))
    return _Layer(lambda x: tf.matmul(x, kernel) + bias, [kernel, bias])


def _relu_layer() -> _Layer:
    import tensorflow as tf

    return _Layer(tf.nn.relu, [])


def _dense_stack(depth: int) -> _Layer:
    """``depth`` dense layers of 4 units, one after another."""
    layers = [_dense_layer(4, 4) for _ in range(depth)]

    def forward(x):
        for layer in layers:
            x = layer.forward(x)
        return x

    return _Layer(forward, [v for layer in layers for v in layer.variables])


def _timed_step(layer: _Layer, shape: tuple[int, ...], budget_s: float) -> float:
    """The median time of a traced training step (forward, gradients) of ``layer`` on a
    random batch of ``shape``, repeated until ``budget_s`` has passed (at least 3 times)."""
    import statistics

    import tensorflow as tf

    x = tf.random.normal(shape)

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(layer.forward(x))
        return tape.gradient(y, [x, *layer.variables])

    step()  # trace
    times, spent = [], 0.0
    while len(times) < 3 or spent < budget_s:
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
        spent += times[-1]
        if len(times) >= 50:
            break
    return statistics.median(times)
