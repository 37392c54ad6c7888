"""ralp.planner.estimate: the probe's layers compute what the Keras layers they stand for do."""

import keras
import numpy as np
import tensorflow as tf

from ralp.planner import estimate


def _keras_output(layer: keras.layers.Layer, x: np.ndarray, variables: list) -> np.ndarray:
    layer.build(x.shape)
    layer.set_weights([v.numpy() for v in variables])
    return keras.ops.convert_to_numpy(layer(x))


def test_the_probes_conv_and_dense_match_keras_layers_with_the_same_weights():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 8, 8, 5)).astype("float32")
    conv = estimate._conv_layer(5, 7)
    conv.variables[1].assign(rng.normal(size=7).astype("float32"))
    expected = _keras_output(keras.layers.Conv2D(7, 3, padding="same"), x, conv.variables)
    np.testing.assert_allclose(conv.forward(tf.constant(x)).numpy(), expected, rtol=1e-4,
                               atol=1e-5)

    x = rng.normal(size=(3, 6)).astype("float32")
    dense = estimate._dense_layer(6, 4)
    dense.variables[1].assign(rng.normal(size=4).astype("float32"))
    expected = _keras_output(keras.layers.Dense(4), x, dense.variables)
    np.testing.assert_allclose(dense.forward(tf.constant(x)).numpy(), expected, rtol=1e-5,
                               atol=1e-6)


def test_the_stack_chains_its_layers_and_hands_every_variable_to_the_gradients():
    stack = estimate._dense_stack(3)
    assert len(stack.variables) == 6
    x = tf.ones((2, 4))
    expected = x
    for k in range(3):
        kernel, bias = stack.variables[2 * k:2 * k + 2]
        expected = expected @ kernel + bias
    np.testing.assert_allclose(stack.forward(x).numpy(), expected.numpy(), rtol=1e-6)
