"""Graphs users write: keras.ops nodes, per-pixel Dense, several inputs, shared layers,
nested backbones, several outputs; each profiles with a sensible decision, and the rewriter
cuts what the profiler chose (or refuses, saying what to do)."""

import keras
import numpy as np
import pytest
from keras import layers, ops

import ralp
from ralp.placement.plan import Plan, PlanError
from ralp.placement.rewriter import PlacedModel, split_model
from ralp.profiler.kinds import COMPUTE_DEMAND_KINDS
from ralp.profiler.layer_table import build_layer_table


def recomposes(model, plan) -> tuple[str, ...]:
    """Split ``model`` as ``plan`` says; head then tail must compute what the model does."""
    split = split_model(PlacedModel(model, plan, {}))
    inputs = [np.random.RandomState(k).rand(2, *t.shape[1:]).astype("float32")
              for k, t in enumerate(model.inputs)]
    feed = inputs[0] if len(inputs) == 1 else inputs
    np.testing.assert_allclose(split.tail(split.head(feed)), model(feed), rtol=1e-5, atol=1e-6)
    return split.boundary


def profiled_plan(model, batch=8):
    p = ralp.profile(model, batch, threshold=10.0)  # the graph is under test, not S
    return p, Plan.from_profile(p)


def no_compute_demand_row_offloaded(p):
    return all(p.table.row(n).kind not in COMPUTE_DEMAND_KINDS for n in p.offloaded_layers)


def test_keras_ops_nodes_are_other_rows_without_parameters():
    x = inp = keras.Input((8, 8, 3), name="image")
    a = layers.Conv2D(4, 3, padding="same", name="conv")(x)
    x = ops.relu(a) + a  # two keras.ops nodes: relu, add
    x = ops.reshape(x, (-1, 8 * 8 * 4))
    x = layers.Dense(10, name="logits")(x)
    model = keras.Model(inp, x, name="with_ops")
    t = build_layer_table(model, 2)
    ops_rows = [r for r in t.rows if r.layer_type in ("Relu", "Add", "Reshape")]
    assert [r.layer_type for r in ops_rows] == ["Relu", "Add", "Reshape"]
    assert all(r.kind == "other" and r.params == 0 and r.position is None for r in ops_rows)
    relu, add, reshape = ops_rows
    assert relu.flops == add.flops == 8 * 8 * 4  # element-wise: one per output value
    assert reshape.flops == 0  # data movement
    assert add.inbound == (relu.name, "conv")
    p, plan = profiled_plan(model)
    assert p.split_after is not None and "logits" in p.offloaded_layers
    recomposes(model, plan)


def test_a_per_pixel_dense_is_a_convolution_and_stays_on_the_workers():
    x = inp = keras.Input((8, 8, 16), name="image")
    x = layers.DepthwiseConv2D(3, padding="same", name="dw")(x)
    x = layers.LayerNormalization(name="ln")(x)
    x = layers.Dense(64, name="pointwise1")(x)  # a 1x1 convolution, written as Dense
    x = layers.Dense(16, name="pointwise2")(x)
    x = layers.GroupNormalization(4, name="gn")(x)
    x = layers.SeparableConv2D(8, 3, name="sep")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Dense(32, name="fc")(x)
    x = layers.Dense(10, name="logits")(x)
    model = keras.Model(inp, x, name="pointwise")
    t = build_layer_table(model, 4)
    kinds = {r.name: r.kind for r in t.rows}
    assert kinds["pointwise1"] == kinds["pointwise2"] == "conv"
    assert kinds["dw"] == kinds["sep"] == "conv"
    assert kinds["ln"] == kinds["gn"] == "norm"
    assert kinds["fc"] == kinds["logits"] == "fc"  # flat inputs
    assert t.row("pointwise1").flops == 2 * 16 * 64 * 64 + 64 * 64  # per pixel, every pixel
    p, plan = profiled_plan(model)
    assert p.split_after == "gap" and no_compute_demand_row_offloaded(p)
    recomposes(model, plan)


def test_a_dense_at_a_single_position_is_fully_connected():
    x = inp = keras.Input((4, 4, 8))
    x = layers.Conv2D(8, 3, padding="same", name="conv")(x)
    x = layers.GlobalAveragePooling2D(keepdims=True, name="gap")(x)  # (1, 1, 8)
    x = layers.Dense(10, name="logits")(x)
    assert build_layer_table(keras.Model(inp, x), 1).row("logits").kind == "fc"


def test_several_inputs_profile_and_split():
    image = keras.Input((8, 8, 3), name="image")
    meta = keras.Input((5,), name="meta")
    x = layers.Conv2D(4, 3, padding="same", name="conv")(image)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Concatenate(name="cat")([x, meta])
    x = layers.Dense(32, name="fc")(x)
    x = layers.Dense(3, name="logits")(x)
    model = keras.Model([image, meta], x, name="two_inputs")
    p, plan = profiled_plan(model)
    t = p.table
    assert {"image", "meta"} <= {r.name for r in t.rows}
    assert t.row("cat").inbound == ("flatten", "meta")
    assert p.params_total == model.count_params()
    assert p.offloaded_layers and no_compute_demand_row_offloaded(p)
    recomposes(model, plan)


def shared_model():
    """One Dense applied to two branches: its parameters once, its calls on one side."""
    x = inp = keras.Input((6, 6, 3), name="image")
    c = layers.Conv2D(4, 3, name="conv")(x)
    a = layers.Flatten(name="flat_a")(c)
    b = layers.Flatten(name="flat_b")(layers.MaxPooling2D(1, name="pool")(c))
    shared = layers.Dense(64, name="shared")
    y = layers.Concatenate(name="cat")([shared(a), shared(b)])
    y = layers.Dense(32, name="fc")(y)
    y = layers.Dense(5, name="logits")(y)
    return keras.Model(inp, y, name="shared_twice")


def test_a_shared_layer_counts_once_and_no_split_falls_between_its_calls():
    model = shared_model()
    t = build_layer_table(model, 4)
    row = t.row("shared")
    assert row.calls == 2 and row.params == 16 * 4 * 64 + 64
    assert p_total(t) == model.count_params()
    assert row.flops == 2 * (2 * 64 * 64 + 64)  # once per call
    assert set(row.inbound) == {"flat_a", "flat_b"}
    p, plan = profiled_plan(model)
    names = [r.name for r in t.rows]
    split = names.index(p.split_after)
    # either every call of the shared layer is kept, or every call is offloaded
    producers = [names.index(s) for s in row.inbound]
    assert names.index("shared") > split or max(producers) <= split
    recomposes(model, plan)


def p_total(table):
    return sum(r.params for r in table.rows)


def test_a_plan_between_a_shared_layers_calls_is_refused():
    model = shared_model()
    names = tuple(r.name for r in build_layer_table(model, 1).rows)
    # keep "shared" (first call on flat_a) but offload flat_b, which its second call reads
    moved = names[names.index("shared") + 1 :]
    assert "flat_b" in moved
    plan = Plan.offloading(names, moved)
    with pytest.raises(PlanError, match="'shared' stays on the workers.*shared layer"):
        split_model(PlacedModel(model, plan, {}))


def backbone_model(with_classifier_inside=False):
    inner = keras.Input((8, 8, 3))
    y = layers.Conv2D(8, 3, padding="same", name="conv1")(inner)
    y = layers.MaxPooling2D(2, name="pool1")(y)
    y = layers.Conv2D(8, 3, padding="same", name="conv2")(y)
    y = layers.Flatten(name="flatten")(y)
    if with_classifier_inside:
        y = layers.Dense(128, name="fc_inside")(y)
    backbone = keras.Model(inner, y, name="backbone")
    x = inp = keras.Input((8, 8, 3), name="image")
    x = backbone(x)
    x = layers.Dense(64, name="fc")(x)
    x = layers.Dense(10, name="logits")(x)
    return keras.Model(inp, x, name="with_backbone")


def test_a_nested_backbone_splits_after_it():
    model = backbone_model()
    p, plan = profiled_plan(model)
    assert p.split_after == "backbone/flatten"
    assert p.offloaded_layers == ["fc", "logits"]
    assert recomposes(model, plan) == ("backbone",)


def test_a_split_inside_a_nested_backbone_is_refused_and_the_profiler_avoids_it():
    model = backbone_model(with_classifier_inside=True)
    p, plan = profiled_plan(model)
    # the cheapest cut would be after conv2 (inside the backbone); the profiler splits after it
    assert p.split_after == "backbone/fc_inside"
    recomposes(model, plan)
    names = tuple(r.name for r in p.table.rows)
    inside = Plan.offloading(names, ["backbone/flatten", "backbone/fc_inside", "fc", "logits"])
    with pytest.raises(PlanError, match="inside the nested model 'backbone'.*Split after it"):
        split_model(PlacedModel(model, inside, {}))


def test_a_backbone_of_keras_applications_in_a_sequential():
    base = keras.applications.MobileNetV2(weights=None, include_top=False, input_shape=(32, 32, 3))
    model = keras.Sequential([keras.Input((32, 32, 3)), base,
                              layers.GlobalAveragePooling2D(name="gap"),
                              layers.Dense(64, activation="relu", name="fc"),
                              layers.Dense(10, name="logits")], name="transfer")
    p, plan = profiled_plan(model)
    assert p.split_after.startswith(f"{base.name}/")
    assert p.offloaded_layers == ["gap", "fc", "logits"]
    assert p.params_total == model.count_params()
    assert recomposes(model, plan) == (base.name,)


def test_several_outputs_profile():
    x = inp = keras.Input((8, 8, 3))
    x = layers.Conv2D(4, 3, name="conv")(x)
    x = layers.Flatten(name="flatten")(x)
    a = layers.Dense(10, name="head_a")(x)
    b = layers.Dense(2, name="head_b")(x)
    p = ralp.profile(keras.Model(inp, [a, b]), 4, threshold=10.0)
    assert p.table.output_names == ("head_a", "head_b")
    assert p.params_total == sum(r.params for r in p.table.rows)
