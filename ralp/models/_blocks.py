"""Layer helpers shared by the zoo, mirroring ``ConvNetBuilder`` of the TF CNN benchmark.

Source mirrored: ``tensorflow/benchmarks`` ``scripts/tf_cnn_benchmarks/convnet_builder.py``
and ``scripts/tf_cnn_benchmarks/models/model.py``:

- ``cnn.conv(n, kh, kw, sh=1, sw=1, mode='SAME', activation='relu', bias=0.0)``: a conv
  without bias (``use_bias=False``) followed by a bias add (constant 0) when batch norm is
  off, or by ``batch_norm(**cnn.batch_norm_config)`` (and no bias) when it is on, then
  relu. Kernel initializer ``tf.variance_scaling_initializer()`` (scale 1, fan_in,
  truncated normal). :func:`conv` / :func:`conv_bn` below.
- ``cnn.batch_norm(decay=0.999, scale=False, epsilon=0.001)`` with ``center=True``:
  :data:`BENCHMARK_BN`. Keras ``momentum`` has the same meaning as TF's ``decay``.
- ``cnn.affine(n, activation='relu', bias=0.0)``: ``x @ W + b`` with
  ``W ~ truncated_normal(stddev=sqrt(k / fan_in))``, ``k = 2`` for relu else 1:
  :func:`dense`.
- ``cnn.dropout(keep_prob=0.5)``: ``Dropout(rate=1 - keep_prob)``.
- ``cnn.mpool``/``cnn.apool`` default to stride 2 and ``'VALID'`` padding.
- ``CNNModel.build_network`` appends ``cnn.affine(nclass, activation='linear')`` after
  ``add_inference``: the ``logits`` layer of :func:`classifier`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import keras
from keras import layers

CHANNELS = 3  # ``CNNModel.depth``: every imagenet benchmark model takes RGB input.


@dataclass(frozen=True)
class BatchNormConfig:
    """Arguments of ``cnn.batch_norm`` (``decay`` is Keras ``momentum``)."""

    momentum: float
    epsilon: float
    scale: bool
    center: bool = True


# ``ConvNetBuilder.batch_norm`` defaults (``batch_norm_config = {}``), used by inception3.
BENCHMARK_BN = BatchNormConfig(momentum=0.999, epsilon=1e-3, scale=False)
# ``ResnetModel.add_inference``: ``{'decay': 0.9, 'epsilon': 1e-5, 'scale': True}``.
RESNET_BN = BatchNormConfig(momentum=0.9, epsilon=1e-5, scale=True)


def image_input(image_size: int) -> keras.KerasTensor:
    """The NHWC image input ``(None, image_size, image_size, 3)``."""
    return keras.Input(shape=(image_size, image_size, CHANNELS), name="images")


def _conv_initializer() -> keras.initializers.Initializer:
    # tf.variance_scaling_initializer(): scale 1.0, fan_in, truncated normal.
    return keras.initializers.VarianceScaling(
        scale=1.0, mode="fan_in", distribution="truncated_normal"
    )


def conv(
    x: keras.KerasTensor,
    filters: int,
    kernel: int | tuple[int, int],
    *,
    name: str,
    strides: int = 1,
    padding: str = "same",
    activation: str | None = "relu",
) -> keras.KerasTensor:
    """``cnn.conv`` with batch norm off: conv + bias (init 0) + relu, as one ``Conv2D``."""
    return layers.Conv2D(
        filters,
        kernel,
        strides=strides,
        padding=padding,
        activation=activation,
        use_bias=True,
        kernel_initializer=_conv_initializer(),
        bias_initializer="zeros",
        name=name,
    )(x)


def conv_bn(
    x: keras.KerasTensor,
    filters: int,
    kernel: int | tuple[int, int],
    *,
    bn: BatchNormConfig,
    conv_name: str,
    bn_name: str,
    relu_name: str | None,
    strides: int = 1,
    padding: str = "same",
) -> keras.KerasTensor:
    """``cnn.conv`` with batch norm on: bias-free conv, batch norm, then relu.

    ``relu_name=None`` means ``activation=None`` in the benchmark (no relu).
    """
    x = layers.Conv2D(
        filters,
        kernel,
        strides=strides,
        padding=padding,
        use_bias=False,
        kernel_initializer=_conv_initializer(),
        name=conv_name,
    )(x)
    x = layers.BatchNormalization(
        axis=-1,
        momentum=bn.momentum,
        epsilon=bn.epsilon,
        center=bn.center,
        scale=bn.scale,
        name=bn_name,
    )(x)
    if relu_name is not None:
        x = layers.Activation("relu", name=relu_name)(x)
    return x


def dense(
    x: keras.KerasTensor, units: int, *, name: str, activation: str = "relu"
) -> keras.KerasTensor:
    """``cnn.affine``: truncated-normal kernel with stddev ``sqrt(k / fan_in)``, zero bias."""
    fan_in = int(x.shape[-1])
    factor = 2.0 if activation == "relu" else 1.0
    return layers.Dense(
        units,
        activation=activation,
        kernel_initializer=keras.initializers.TruncatedNormal(
            mean=0.0, stddev=math.sqrt(factor / fan_in)
        ),
        bias_initializer="zeros",
        name=name,
    )(x)


def classifier(
    x: keras.KerasTensor,
    num_classes: int,
    *,
    hidden: Sequence[int] = (),
    first_index: int = 6,
    dropout: float | None = None,
) -> keras.KerasTensor:
    """``flatten``, then ``fc{i}`` (+ ``drop{i}``) per hidden width, then ``logits``.

    ``cnn.reshape([-1, C * H * W])`` becomes a ``Flatten``: identical at the default
    image size, and still a per-example flatten when the image size is changed (the
    benchmark's hard-coded reshape would fold the extra pixels into the batch axis).
    """
    x = layers.Flatten(name="flatten")(x)
    for i, width in enumerate(hidden, start=first_index):
        x = dense(x, width, name=f"fc{i}")
        if dropout is not None:
            x = layers.Dropout(dropout, name=f"drop{i}")(x)
    # CNNModel.build_network: network.affine(nclass, activation='linear').
    return dense(x, num_classes, name="logits", activation="linear")


def final_avg_pool(x: keras.KerasTensor, window: int, *, name: str) -> keras.KerasTensor:
    """The benchmark's final ``cnn.apool(window, window, 1, 1, 'VALID')``.

    The benchmark's window (googlenet 7, inception3 8) assumes the default image size.
    When the image is scaled down the remaining feature map can be smaller than that
    window, so the window is clipped to the feature map: the benchmark's window when
    the map is at least that large, else one window over the whole map (output 1x1).
    """
    height, width = int(x.shape[1]), int(x.shape[2])
    pool = (min(window, height), min(window, width))
    return layers.AveragePooling2D(pool, strides=1, padding="valid", name=name)(x)
