"""ralp.wrap's default decision (mode "auto" without a calibration): from the model's shapes,
FLOPs at a device's rates and the byte model, on a cluster of devices. The device rates are
fixed here (one budgeted CPU device's order of magnitude) so the decisions do not depend on the
machine running the tests; the probe that measures them is checked on its own.

What each model should get, and why:
- a shallow CNN with two convolutions and nearly all parameters in its FC layers: RALP. Plain
  PS moves every FC weight over every worker's link each step; placement moves activations.
  The paper's skewness rule says "not eligible" for it (S > 0: the mass sits at the first FC
  position of seven), which is the rule's blind spot.
- a conv-heavy residual CNN ending in global average pooling and a 10-class Dense: plain PS.
  Its tail holds a few thousand parameters; moving it saves nothing and adds a PS hop.
- vgg11, alexnet and keras.applications' VGG16 (FC-heavy) at 1 Gbit/s: RALP.
- keras.applications' MobileNetV2 (pooling and a small classifier): plain PS.
"""

import math

import keras
import pytest

from ralp.cluster.spec import ClusterSpec, free_ports
from ralp.models import build_model
from ralp.planner.auto import TaskLinks, choose_on_tasks
from ralp.planner.cluster_plan import MIN_BYTES_SAVED
from ralp.planner.estimate import DeviceRates, estimate_compute, probe
from ralp.planner.workload import Workload
from ralp.profiler.api import profile

# Three workers and a PS, each a device of its own: N = 4 (only addresses; nothing connects).
_PORTS = [f"127.0.0.1:{p}" for p in free_ports(5)]
CLUSTER = ClusterSpec(_PORTS[0], tuple(_PORTS[1:4]), (_PORTS[4],))
# About one budgeted CPU device (0.4 of a core): tens of GFLOP/s on dense products,
# element-wise layers memory-bound, a fraction of a millisecond per layer.
RATES = DeviceRates(conv_flops_per_s=15e9, fc_flops_per_s=15e9, other_flops_per_s=1.5e9,
                    per_layer_s=3e-4)
BATCH = 8


def _decide(model, bandwidth: str = "1gbit"):
    workload = Workload(profile(model, BATCH))
    compute = estimate_compute(workload.table, workload.offloaded, RATES)
    return choose_on_tasks(workload, compute, CLUSTER, TaskLinks(bandwidth), "fixed test rates")


def _shallow_fc_heavy():
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(16, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(32, 3, activation="relu")(x)
    x = keras.layers.Flatten()(x)
    for units in (512, 512):
        x = keras.layers.Dense(units, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(x))


def _residual_conv_heavy():
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(inputs)
    for _ in range(3):
        y = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(x)
        y = keras.layers.Conv2D(64, 3, padding="same")(y)
        x = keras.layers.ReLU()(keras.layers.Add()([x, y]))
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(x))


def test_a_shallow_fc_heavy_cnn_is_placed_where_the_skewness_rule_would_not():
    choice = _decide(_shallow_fc_heavy())
    assert choice.mode == "ralp", choice.why
    assert "not eligible" in choice.rule  # the rule alone would train it on plain PS
    # why: placement moves a small share of plain PS's bytes, and the step follows
    assert choice.bytes_per_step["ralp"] < 0.2 * choice.bytes_per_step["ps"]
    assert choice.step_s["ralp"] < choice.step_s["ps"]
    assert "ps" in choice.why and "ralp" in choice.why and "skewness rule" in choice.why


def test_a_conv_heavy_cnn_with_a_tiny_classifier_stays_whole():
    choice = _decide(_residual_conv_heavy())
    assert choice.mode == "ps", choice.why
    # moving a 650-parameter classifier saves no bytes worth a PS hop
    assert choice.bytes_per_step["ralp"] > (1 - MIN_BYTES_SAVED) * choice.bytes_per_step["ps"]


@pytest.mark.parametrize("name,image", [("alexnet", 67), ("vgg11", 32)])
def test_fc_heavy_zoo_models_are_placed_at_1gbit(name, image):
    choice = _decide(build_model(name, image_size=image, num_classes=1000))
    assert choice.mode == "ralp", choice.why


def test_keras_applications_vgg16_is_placed_and_mobilenet_is_not():
    vgg = keras.applications.VGG16(weights=None, input_shape=(64, 64, 3), classes=1000)
    assert _decide(vgg).mode == "ralp"
    mobile = keras.applications.MobileNetV2(weights=None, input_shape=(64, 64, 3), classes=10)
    choice = _decide(mobile)
    assert choice.mode == "ps", choice.why
    # the profiler would split it (S <= K): the rule alone would move its 0.6% of parameters
    assert "eligible" in choice.rule and "not eligible" not in choice.rule


def test_a_faster_network_narrows_the_gain():
    model = build_model("vgg11", image_size=32, num_classes=1000)
    slow, fast = _decide(model, "1gbit"), _decide(model, "100gbit")
    gain = [c.predicted_images_per_sec["ralp"] / c.predicted_images_per_sec["ps"]
            for c in (slow, fast)]
    assert gain[0] > gain[1]


def test_estimated_compute_adds_up_over_the_layers():
    workload = Workload(profile(_shallow_fc_heavy(), BATCH))
    compute = estimate_compute(workload.table, workload.offloaded, RATES)
    assert 0 < compute.tail_s < compute.full_s
    rows = workload.table.rows
    expected = sum(RATES.layer_s(r.kind, r.flops * BATCH) for r in rows)
    assert compute.full_s == pytest.approx(expected)


def test_the_probe_measures_rates_of_this_device():
    rates = probe()
    for value in (rates.conv_flops_per_s, rates.fc_flops_per_s, rates.other_flops_per_s):
        assert math.isfinite(value) and value > 1e6
    assert 0 <= rates.per_layer_s < 0.05
