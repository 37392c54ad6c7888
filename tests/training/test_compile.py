"""What a model trains with: the compiled set-up, a loss that matches the output, metrics."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

from ralp.training.compile import (
    TrainingSetupError,
    default_loss,
    optimizer_factory,
    outputs_probabilities,
    training_setup,
)


def classifier(head=None):
    x = inp = keras.Input((6,))
    x = layers.Dense(8, activation="relu", name="hidden")(x)
    x = head(x) if head else layers.Dense(4, name="logits")(x)
    return keras.Model(inp, x)


@pytest.mark.parametrize(
    "head, probabilities",
    [
        (None, False),
        (lambda x: layers.Dense(4, activation="softmax")(x), True),
        (lambda x: layers.Activation("softmax")(layers.Dense(4)(x)), True),
        (lambda x: layers.Softmax()(layers.Dense(4)(x)), True),
        (lambda x: keras.ops.softmax(layers.Dense(4)(x)), True),
        (lambda x: layers.Reshape((4,))(layers.Dense(4, activation="softmax")(x)), True),
        (lambda x: layers.Dense(4)(layers.Dense(4, activation="softmax")(x)), False),
    ],
)
def test_the_default_loss_matches_the_output(head, probabilities):
    model = classifier(head)
    assert outputs_probabilities(model) is probabilities
    x = np.random.RandomState(0).rand(5, 6).astype("float32")
    y = np.array([0, 1, 2, 3, 0])
    out = model(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Keras warns when probabilities are taken for logits
        value = float(default_loss(model)(y, out))
    probs = out.numpy() if probabilities else tf.nn.softmax(out).numpy()
    expected = -np.mean(np.log(probs[np.arange(5), y]))
    assert value == pytest.approx(expected, rel=1e-5)


def test_keras_applications_output_probabilities():
    model = keras.applications.MobileNet(weights=None, input_shape=(32, 32, 3), classes=5)
    assert outputs_probabilities(model)
    nested = keras.Sequential([keras.Input((32, 32, 3)), model])
    assert outputs_probabilities(nested)


def test_a_compiled_model_brings_its_optimizer_loss_and_metrics():
    model = classifier()
    model.compile(optimizer=keras.optimizers.Adam(3e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(k=2)])
    setup = training_setup(model)
    assert setup.sources == {"optimizer": "compile", "loss": "compile", "metrics": "compile"}
    made = optimizer_factory(setup.optimizer)()
    assert isinstance(made, keras.optimizers.Adam)
    assert float(made.learning_rate) == pytest.approx(3e-4)
    assert setup.loss is model.loss
    assert setup.metrics[0] == "accuracy"
    # a metric object comes as its config: the trainer makes its own where it trains
    assert setup.metrics[1]["class_name"] == "SparseTopKCategoricalAccuracy"
    # arguments win over the compiled set-up
    given = training_setup(model, optimizer="sgd", loss="sparse_categorical_crossentropy",
                           metrics=[])
    assert given.sources == {"optimizer": "argument", "loss": "argument", "metrics": "argument"}
    assert given.optimizer == "sgd" and given.metrics == ()


def test_an_uncompiled_model_gets_the_defaults():
    setup = training_setup(classifier())
    assert setup.sources == {"optimizer": "default", "loss": "default", "metrics": "default"}
    assert setup.optimizer is None and setup.metrics == ("accuracy",)
    assert isinstance(optimizer_factory(None)(), keras.optimizers.SGD)


def test_weighted_metrics_and_the_compile_config_come_along():
    model = classifier()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], weighted_metrics=["accuracy"], jit_compile=False)
    setup = training_setup(model)
    assert setup.weighted_metrics == ("accuracy",)
    assert setup.compile_config["jit_compile"] is False


@pytest.mark.parametrize("policy", ["mixed_float16"])
def test_float16_models_are_refused(policy):
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = classifier()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    with pytest.raises(TrainingSetupError, match="loss scaling"):
        training_setup(model)


def test_bfloat16_models_are_taken():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = classifier()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert training_setup(model).sources["loss"] == "default"


def test_per_output_loss_weights_are_refused():
    model = classifier()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", loss_weights=[0.5])
    with pytest.raises(TrainingSetupError, match="loss_weights"):
        training_setup(model)


def test_several_outputs_are_refused_with_what_to_do():
    x = inp = keras.Input((6,))
    model = keras.Model(inp, [layers.Dense(2)(x), layers.Dense(3)(x)], name="two_heads")
    with pytest.raises(TrainingSetupError, match="2 outputs.*model.outputs\\[0\\]"):
        training_setup(model)
