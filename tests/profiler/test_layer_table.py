"""The layer table from shapes alone: kinds, counts, outputs, FLOPs, edges, and refusals."""

import keras
import pytest
from keras import layers

from ralp.profiler.kinds import register_layer_kind, rule_for
from ralp.profiler.layer_table import ProfileError, build_layer_table


def small_cnn():
    x = inp = keras.Input((16, 16, 3), name="image")
    x = layers.Conv2D(8, 3, padding="same", activation="relu", name="conv1")(x)
    x = layers.MaxPooling2D(2, name="pool1")(x)
    x = layers.Conv2D(4, 3, strides=2, padding="valid", name="conv2")(x)
    x = layers.BatchNormalization(name="bn")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(32, activation="relu", name="fc1")(x)
    x = layers.Dropout(0.5, name="drop")(x)
    x = layers.Dense(10, name="logits")(x)
    return keras.Model(inp, x, name="small")


def test_rows_match_hand_computed_shapes_params_and_flops():
    t = build_layer_table(small_cnn(), batch_size=4)
    names = [r.name for r in t.rows]
    assert names == ["image", "conv1", "pool1", "conv2", "bn", "flatten", "fc1", "drop", "logits"]
    r = {row.name: row for row in t.rows}
    assert [r[n].kind for n in names] == [
        "other",
        "conv",
        "pool",
        "conv",
        "norm",
        "other",
        "fc",
        "other",
        "fc",
    ]
    assert r["conv1"].params == 3 * 3 * 3 * 8 + 8
    assert r["conv2"].output_shape == (3, 3, 4)  # (8 - 3) // 2 + 1 = 3
    assert r["bn"].params == 4 * 4 and r["bn"].trainable_params == 2 * 4
    assert r["fc1"].params == 36 * 32 + 32
    assert r["logits"].cumulative_params == t.params_total
    assert r["conv1"].output_elements == 16 * 16 * 8
    assert r["conv1"].output_bytes == 16 * 16 * 8 * 4 * 4  # elements * batch * float32
    # FLOPs per sample: 2 per MAC plus one add per bias.
    assert r["conv1"].flops == 2 * (3 * 3 * 3) * (16 * 16 * 8) + 16 * 16 * 8
    assert r["conv2"].flops == 2 * (3 * 3 * 8) * (3 * 3 * 4) + 3 * 3 * 4
    assert r["fc1"].flops == 2 * 36 * 32 + 32
    assert r["pool1"].flops == 4 * (8 * 8 * 8)
    assert r["fc1"].inbound == ("flatten",)
    assert t.output_names == ("logits",)
    assert t.param_bytes_total == 4 * t.params_total
    assert [v[1] for v in t.variables][:2] == ["conv1/kernel", "conv1/bias"]


def test_sequential_matches_functional():
    seq = keras.Sequential(
        [
            keras.Input((16, 16, 3)),
            layers.Conv2D(8, 3, name="c"),
            layers.Flatten(name="f"),
            layers.Dense(5, name="d"),
        ],
        name="seq",
    )
    t = build_layer_table(seq, 2)
    assert [r.name for r in t.rows][1:] == ["c", "f", "d"]
    assert t.rows[0].kind == "other" and t.rows[0].output_shape == (16, 16, 3)
    assert t.row("d").params == 14 * 14 * 8 * 5 + 5


def test_nested_models_are_flattened_with_qualified_names_and_edges():
    inner_in = keras.Input((8, 8, 4))
    y = layers.Conv2D(4, 3, padding="same", name="conv")(inner_in)
    y = layers.Add(name="add")([y, inner_in])
    block = keras.Model(inner_in, y, name="block")
    x = inp = keras.Input((10, 10, 3), name="image")
    x = layers.Conv2D(4, 3, name="stem")(x)
    x = block(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(3, name="fc")(x)
    t = build_layer_table(keras.Model(inp, x), 1)
    assert [r.name for r in t.rows] == ["image", "stem", "block/conv", "block/add", "flatten", "fc"]
    assert t.row("block/conv").inbound == ("stem",)
    assert t.row("block/add").inbound == ("block/conv", "stem")
    assert t.row("flatten").inbound == ("block/add",)


def test_branches_record_every_producer():
    x = inp = keras.Input((8, 8, 3), name="image")
    a = layers.Conv2D(2, 1, name="a")(x)
    b = layers.Conv2D(3, 1, name="b")(x)
    x = layers.Concatenate(name="cat")([a, b])
    t = build_layer_table(keras.Model(inp, x), 1)
    assert t.row("cat").inbound == ("a", "b")
    assert t.row("cat").output_shape == (8, 8, 5)


def test_subclassed_model_is_refused_with_what_to_do():
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.fc = layers.Dense(3)

        def call(self, x):
            return self.fc(x)

    with pytest.raises(ProfileError, match="subclassed.*functional"):
        build_layer_table(Net(), 8)


def test_unbuilt_sequential_and_dynamic_shapes_are_refused():
    with pytest.raises(ProfileError, match="no input shape"):
        build_layer_table(keras.Sequential([layers.Dense(3)]), 8)
    x = inp = keras.Input((None, None, 3))
    x = layers.Conv2D(2, 3)(x)
    with pytest.raises(ProfileError, match="fixed input size"):
        build_layer_table(keras.Model(inp, x), 8)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "8", True])
def test_bad_batch_size(bad):
    with pytest.raises(ProfileError, match="batch_size"):
        build_layer_table(small_cnn(), bad)


def test_not_a_model():
    with pytest.raises(ProfileError, match="keras.Model"):
        build_layer_table(layers.Dense(3), 8)


def test_user_layers_can_register_a_kind():
    class MyFC(layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(shape=(shape[-1], 6))

        def call(self, x):
            return x @ self.w

        def compute_output_shape(self, shape):
            return (*shape[:-1], 6)

    assert rule_for(MyFC()).kind == "other"
    register_layer_kind(MyFC, "fc", lambda layer, ins, outs: 2 * ins[0][-1] * 6)
    assert rule_for(MyFC()).kind == "fc"
    x = inp = keras.Input((5,))
    x = MyFC(name="mine")(x)
    assert build_layer_table(keras.Model(inp, x), 1).row("mine").flops == 60
    with pytest.raises(ValueError, match="unknown layer kind"):
        register_layer_kind(MyFC, "attention")


def test_dense_subclass_inherits_its_kind():
    class Wide(layers.Dense):
        pass

    rule = rule_for(Wide(3))
    assert rule.kind_of(Wide(3), [(5,)], [(3,)]) == "fc"
    assert rule.kind_of(Wide(3), [(4, 4, 5)], [(4, 4, 3)]) == "conv"  # per pixel
