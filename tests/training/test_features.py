"""The feature structures fit takes (ralp.training.features, fit_inputs.standard_data): each
turned into the model's own form, and what does not fit refused before training with a
TrainingSetupError that says what to do."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from ralp.training.compile import TrainingSetupError
from ralp.training.data import Sharding
from ralp.training.features import ModelInputs
from ralp.training.fit_inputs import fit_data, standard_data, standard_validation
from ralp.training.trainer import _label_spec
from ralp.training.validation import validation_for

SPARSE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
ROWS = 10


def two_inputs(dict_inputs=False):
    """Images (4, 4, 2) and a vector of 3, joined; built on a list, or on a dict whose keys
    differ from the inputs' names."""
    images = keras.Input((4, 4, 2), name="images")
    meta = keras.Input((3,), name="meta")
    x = keras.layers.Concatenate()([keras.layers.Flatten()(images), meta])
    out = keras.layers.Dense(5, name="logits")(x)
    inputs = {"b_img": images, "a_meta": meta} if dict_inputs else [images, meta]
    return keras.Model(inputs, out, name="two")


def one_input():
    images = keras.Input((3,), name="images")
    return keras.Model(images, keras.layers.Dense(4)(images), name="one")


def arrays():
    rng = np.random.default_rng(0)
    return (rng.normal(size=(ROWS, 4, 4, 2)).astype("float32"),
            np.arange(ROWS * 3, dtype="float32").reshape(ROWS, 3),
            (np.arange(ROWS) % 5).astype("int32"))


def test_each_input_has_its_key_in_the_models_order():
    assert ModelInputs.of(two_inputs()).keys == ("images", "meta")
    assert ModelInputs.of(two_inputs()).kind == "list"
    dict_model = ModelInputs.of(two_inputs(dict_inputs=True))
    assert dict_model.kind == "dict"  # Keras orders a dict's inputs by key
    assert dict_model.keys == ("a_meta", "b_img")
    assert ModelInputs.of(one_input()).kind == "single"
    sequential = keras.Sequential([keras.Input((3,), name="s"), keras.layers.Dense(2)])
    assert ModelInputs.of(sequential).kind == "single"


@pytest.mark.parametrize("form", ["list", "tuple", "dict", "dict with more keys"])
def test_arrays_of_two_inputs_become_a_tuple_in_the_models_order(form):
    images, meta, y = arrays()
    x = {"list": [images, meta], "tuple": (images, meta), "dict": {"meta": meta,
                                                                   "images": images},
         "dict with more keys": {"meta": meta, "other": y, "images": images}}[form]
    got, labels = standard_data(x, y, two_inputs())
    assert isinstance(got, tuple) and got[0] is images and got[1] is meta
    assert labels is y


def test_a_model_built_on_a_dict_takes_a_dict_by_its_keys():
    images, meta, y = arrays()
    model = two_inputs(dict_inputs=True)
    got, _ = standard_data({"b_img": images, "a_meta": meta}, y, model)
    assert set(got) == {"a_meta", "b_img"} and got["b_img"] is images
    np.testing.assert_allclose(model(got), model({"b_img": images, "a_meta": meta}))
    with pytest.raises(TrainingSetupError, match="not in sorted order, so give the dict"):
        standard_data([images, meta], y, model)  # as Keras refuses it


def test_a_one_input_model_takes_an_array_or_a_dict_by_its_inputs_name():
    x = np.zeros((ROWS, 3), "float32")
    y = np.zeros(ROWS, "int32")
    assert standard_data({"images": x}, y, one_input())[0] is x
    assert standard_data([x], [y], one_input())[1] is y  # a list of one: that one
    np.testing.assert_array_equal(standard_data(x.tolist(), y, one_input())[0], x)


@pytest.mark.parametrize(("x", "match"), [
    (lambda i, m: i, r"'two' takes 2 inputs, a list of arrays in this order or a dict by "
                     r"name: \{'images': \(None, 4, 4, 2\), 'meta': \(None, 3\)\}; got one array"),
    (lambda i, m: [i], "got a list of 1"),
    (lambda i, m: {"images": i, "metadata": m}, r"has keys \['images', 'metadata'\], "
                                                r"without \['meta'\]"),
    (lambda i, m: [i, [m]], "got a nested list"),
])
def test_features_that_do_not_fit_the_inputs_are_refused(x, match):
    images, meta, y = arrays()
    with pytest.raises(TrainingSetupError, match=match):
        standard_data(x(images, meta), y, two_inputs())


def test_a_dataset_of_dict_or_tuple_features_is_mapped_to_the_models_form():
    images, meta, y = arrays()
    model = two_inputs()
    for features in ({"meta": meta, "images": images}, (images, meta)):
        ds = tf.data.Dataset.from_tensor_slices((features, y)).batch(4)
        mapped, _ = standard_data(ds, None, model)
        x, labels = next(iter(mapped))
        assert isinstance(x, tuple)
        np.testing.assert_array_equal(x[0], images[:4])
        np.testing.assert_array_equal(x[1], meta[:4])
    already = tf.data.Dataset.from_tensor_slices(((images, meta), y)).batch(4)
    assert standard_data(already, None, model)[0] is already  # nothing to map


def test_an_unbatched_dataset_is_refused_saying_to_batch_it():
    images, meta, y = arrays()
    for model, features in ((two_inputs(), (images, meta)),
                            (one_input(), np.zeros((ROWS, 3), "float32"))):
        ds = tf.data.Dataset.from_tensor_slices((features, y))
        with pytest.raises(TrainingSetupError, match=r"single samples .* not batches: batch "
                                                     r"it, e.g. dataset.batch\(32\)"):
            standard_data(ds, None, model)


def test_a_dataset_of_the_wrong_structure_is_refused():
    images, meta, y = arrays()
    ds = tf.data.Dataset.from_tensor_slices(({"images": images}, y)).batch(4)
    with pytest.raises(TrainingSetupError, match=r"without \['meta'\]"):
        standard_data(ds, None, two_inputs())
    no_labels = tf.data.Dataset.from_tensor_slices({"images": images, "meta": meta}).batch(4)
    with pytest.raises(TrainingSetupError, match=r"give batches of \(features, labels\)"):
        standard_data(no_labels, None, two_inputs())


def test_string_labels_are_refused_saying_to_map_them_to_ids():
    images, meta, y = arrays()
    words = np.array(["cat", "dog"] * (ROWS // 2))
    with pytest.raises(TrainingSetupError, match=r"labels are strings \(<U3\), not numbers: "
                                                 "map them to integer class ids"):
        standard_data([images, meta], words, two_inputs())
    ds = tf.data.Dataset.from_tensor_slices(((images, meta), words)).batch(4)
    with pytest.raises(TrainingSetupError, match=r"labels are strings \(string\)"):
        standard_data(ds, None, two_inputs())
    # the label spec fit resolves the loss from refuses them too (Keras: "Invalid dtype")
    with pytest.raises(TrainingSetupError, match="not numbers"):
        _label_spec(np.zeros((ROWS, 3)), words)


def test_a_dataset_function_gives_the_models_form():
    images, meta, y = arrays()

    def dataset_fn(context):
        return tf.data.Dataset.from_tensor_slices(({"meta": meta, "images": images}, y)).batch(
            context.get_per_replica_batch_size(4))

    data = fit_data(dataset_fn, None, sample_weight=None, class_weight=None, batch_size=4,
                    steps_per_epoch=2, shuffle=False, model=two_inputs(), loss=SPARSE)
    x, _, rows = next(iter(data.worker_dataset(Sharding(2, True), 1, seed=0)))
    assert isinstance(x, tuple) and x[0].shape == (2, 4, 4, 2) and int(rows) == 2

    def unbatched(context):
        return tf.data.Dataset.from_tensor_slices(((images, meta), y))

    with pytest.raises(TrainingSetupError, match="single samples"):
        fit_data(unbatched, None, sample_weight=None, class_weight=None, batch_size=4,
                 steps_per_epoch=2, shuffle=False, model=two_inputs(), loss=SPARSE)


def test_each_inputs_features_are_checked():
    images, meta, y = arrays()
    model = two_inputs()

    def check(x):
        fit_data(x, y, sample_weight=None, class_weight=None, batch_size=4,
                 steps_per_epoch=None, shuffle=False, model=model, loss=SPARSE)

    check([images, meta])
    with pytest.raises(TrainingSetupError, match=r"input 'meta' of shape \(4,\) per sample, "
                                                 r"but 'two' takes \(3,\)"):
        check([images, np.zeros((ROWS, 4), "float32")])
    with pytest.raises(TrainingSetupError, match="10/9 images, 10 labels"):
        check([images, meta[:9]])
    bad = meta.copy()
    bad[2, 1] = np.inf
    with pytest.raises(TrainingSetupError, match="1 NaN or infinite"):
        check([images, bad])


def test_validation_split_and_validation_data_take_the_same_structures():
    images, meta, y = arrays()
    model = two_inputs()
    x, labels = standard_data({"images": images, "meta": meta}, y, model)
    x, labels, _, held = validation_for(x, labels, validation_split=0.3)
    assert [len(a) for a in x] == [7, 7] and len(labels) == 7
    np.testing.assert_array_equal(held.x[1], meta[7:])  # the last rows of every input
    val = standard_validation(({"meta": meta, "images": images}, y), model)
    assert isinstance(val[0], tuple) and val[0][0] is images
    with pytest.raises(TrainingSetupError, match="validation_data.*without"):
        standard_validation(({"images": images}, y), model)


def _fit_refusals() -> dict:
    """A wrapped two-input model (mode collective, one worker) fed each mistake: the error
    each fit raised, and the updates trained (none). (Training such a model in every mode:
    tests/training/test_keras_reference.py.)"""
    import ralp

    images, meta, y = arrays()
    trainer = ralp.wrap(two_inputs(), mode="collective")
    cases = {
        "unbatched": lambda: trainer.fit(tf.data.Dataset.from_tensor_slices(((images, meta),
                                                                             y))),
        "structure": lambda: trainer.fit(tf.data.Dataset.from_tensor_slices(
            ({"images": images}, y)).batch(4)),
        "strings": lambda: trainer.fit([images, meta], np.array(["a", "b"] * (ROWS // 2))),
        "validation": lambda: trainer.fit([images, meta], y, validation_data=(images, y)),
    }
    errors = {}
    for case, fit in cases.items():
        try:
            fit()
        except Exception as e:  # noqa: BLE001 - the error is what the test checks
            errors[case] = f"{type(e).__name__}: {e}"
    errors["updates"] = trainer.runtime.total_steps
    return errors


def test_fit_refuses_them_before_training():
    from ralp import run_in_fresh_process

    errors = run_in_fresh_process(_fit_refusals, env={"CUDA_VISIBLE_DEVICES": "-1"},
                                  timeout=300)
    assert errors["unbatched"].startswith("TrainingSetupError: fit: the dataset's elements "
                                          "are single samples")
    assert errors["structure"].startswith("TrainingSetupError: fit: model 'two' takes 2 inputs")
    assert errors["strings"].startswith("TrainingSetupError: fit: the labels are strings")
    assert errors["validation"].startswith("TrainingSetupError: fit (validation_data): model "
                                           "'two' takes 2 inputs")
    assert errors["updates"] == 0
