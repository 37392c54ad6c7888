"""Rewriter pieces that need no cluster: op attribution, device function, head/tail split."""

from types import SimpleNamespace

import keras
import numpy as np
import pytest
from keras import layers

from ralp.placement.plan import Plan, PlanError
from ralp.placement.rewriter import LayerDeviceFunction, PlacedModel, layer_of_op, split_model

NAMES = {"conv1_1", "conv1_2", "fc6", "fc7", "logits"}


@pytest.mark.parametrize(
    "op, layer",
    [
        ("ralp_tail_1/fc6_1/MatMul", "fc6"),  # uniquified on trace
        ("gradient_tape/critical_section_execute/ralp_tail_1/fc7_1/MatMul/MatMul_1", "fc7"),
        ("ralp_head_1/conv1_1_1/convolution", "conv1_1"),  # a name that itself ends in _1
        ("ralp_head_1/conv1_2/convolution", "conv1_2"),  # exact names win over stripping
        ("sgd/IdentityN", None),
        ("fc6", None),  # the op's own name is not a scope
    ],
)
def test_layer_of_op(op, layer):
    assert layer_of_op(op, NAMES) == layer


def test_device_function_sends_layer_ops_to_their_task_and_the_rest_to_the_loss_task():
    layers_ = ("images", "conv", "flatten", "fc6", "logits")
    plan = Plan.offloading(layers_, ["flatten", "fc6", "logits"], 2).override(
        {"fc6": 1, "logits": 0}
    )
    fn = LayerDeviceFunction(plan, "/job:ps/replica:0/task:0/device:CPU:0")
    op = lambda name, device="": SimpleNamespace(name=name, device=device)  # noqa: E731
    assert fn(op("ralp_tail_1/fc6_1/MatMul")) == "/job:ps/replica:0/task:1/device:CPU:0"
    assert (
        fn(op("gradient_tape/ralp_tail_1/logits_1/BiasAdd/BiasAddGrad"))
        == "/job:ps/replica:0/task:0/device:CPU:0"
    )
    assert fn(op("sparse_categorical_crossentropy/Mean")) == "/job:ps/replica:0/task:0/device:CPU:0"
    # an explicit inner scope (the optimizer pins an update to its variable's task) wins
    pinned = "/job:ps/replica:0/task:1/device:CPU:0"
    assert fn(op("adam/Mul_3", pinned)) == pinned
    gpu = LayerDeviceFunction(plan, "/job:ps/replica:0/task:0/device:GPU:0", device_type="gpu")
    assert gpu(op("ralp_tail_1/fc6_1/MatMul")) == "/job:ps/replica:0/task:1/device:GPU:0"


def branchy_model():
    x = inp = keras.Input((8, 8, 3), name="images")
    a = layers.Conv2D(4, 3, padding="same", name="conv")(x)
    p = layers.GlobalAveragePooling2D(name="gap")(a)
    m = layers.GlobalMaxPooling2D(name="gmp")(a)
    x = layers.Concatenate(name="cat")([p, m])
    x = layers.Dense(16, activation="relu", name="fc1")(x)
    x = layers.Dense(5, name="logits")(x)
    return keras.Model(inp, x, name="branchy")


def test_split_cuts_every_tensor_and_recomposes_the_model():
    model = branchy_model()
    names = tuple(layer.name for layer in model.layers)
    plan = Plan.offloading(names, ["cat", "fc1", "logits"], 1)
    split = split_model(PlacedModel(model, plan, {}))
    assert split.boundary == ("gap", "gmp")  # two tensors cross
    x = np.random.RandomState(0).rand(2, 8, 8, 3).astype("float32")
    np.testing.assert_allclose(split.tail(split.head(x)), model(x), rtol=1e-6)
    assert {layer.name for layer in split.tail.layers} >= {"cat", "fc1", "logits"}


def test_split_refuses_a_partly_offloaded_nested_model():
    inner_in = keras.Input((4,))
    h = layers.Dense(4, name="a")(inner_in)
    h = layers.Dense(4, name="b")(h)
    block = keras.Model(inner_in, h, name="block")
    x = inp = keras.Input((4,))
    x = layers.Dense(4, name="first")(x)
    x = block(x)
    x = layers.Dense(2, name="out")(x)
    model = keras.Model(inp, x)
    names = ("input_layer", "first", "block/a", "block/b", "out")
    plan = Plan(model.name, 1, names, {"block/b": 0, "out": 0})
    with pytest.raises(PlanError, match="splits inside the nested model 'block'.*Split after it"):
        split_model(PlacedModel(model, plan, {}))


def _two_input_model(ids: bool = False, dict_inputs: bool = False):
    """Images through a convolution, and a second input (floats, or integer ids embedded)
    through its own branch, joined before the FC layers."""
    images = keras.Input((8, 8, 3), name="images")
    meta = keras.Input((4,), name="meta", dtype="int32" if ids else "float32")
    x = layers.Flatten(name="flatten")(layers.Conv2D(4, 3, name="conv")(images))
    m = layers.Flatten(name="ids")(layers.Embedding(10, 2, name="embed")(meta)) if ids else meta
    m = layers.Dense(6, name="meta_fc")(m)
    x = layers.Dense(16, name="fc1")(layers.Concatenate(name="join")([x, m]))
    # a dict whose keys are not the inputs' names (Keras maps a dict of features by them)
    inputs = {"pixels": images, "extra": meta} if dict_inputs else [images, meta]
    return keras.Model(inputs, layers.Dense(5, name="logits")(x), name="two")


def _features(ids: bool):
    rng = np.random.default_rng(0)
    meta = rng.integers(0, 10, (2, 4)).astype("int32") if ids else rng.normal(size=(2, 4))
    return rng.normal(size=(2, 8, 8, 3)).astype("float32"), meta.astype(
        "int32" if ids else "float32")


@pytest.mark.parametrize("ids", [False, True])
def test_the_profilers_split_of_a_two_input_model_sends_the_second_input_raw(ids):
    """The profiler puts the second input's branch on the PS; the split's head takes both
    inputs and hands the second on as it is (no gradient goes back for it), and head and
    tail together are the model."""
    from ralp.placement.choose import choose_plan

    model = _two_input_model(ids)
    choice = choose_plan(model, "ralp", workers=2, num_ps=1, batch_size=8)
    assert "meta_fc" in choice.plan.offloaded and "conv" not in choice.plan.offloaded
    assert "meta" in choice.profile.boundary_layers  # the cost counts the raw input
    split = split_model(PlacedModel(model, choice.plan, {}))
    assert "meta" in split.boundary
    crossing = [t.name for t in split.head.outputs]
    assert split.has_gradient() == tuple(name != "meta" for name in crossing)
    images, meta = _features(ids)
    head_out = split.head([images, meta])
    np.testing.assert_array_equal(head_out[crossing.index("meta")], meta)
    np.testing.assert_allclose(split.tail(head_out), model([images, meta]), rtol=1e-6)


def test_the_head_of_a_model_built_on_a_dict_takes_the_same_dict():
    model = _two_input_model(dict_inputs=True)
    names = tuple(op.name for op in model.operations)
    plan = Plan.offloading(names, ["meta_fc", "join", "fc1", "logits"], 1)
    split = split_model(PlacedModel(model, plan, {}))
    images, meta = _features(False)
    features = {"pixels": images, "extra": meta}
    np.testing.assert_allclose(split.tail(split.head(features)), model(features), rtol=1e-6)
