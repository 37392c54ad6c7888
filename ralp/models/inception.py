"""Inception v3 as in the TF CNN benchmark (``--model=inception3``).

Mirrors ``tensorflow/benchmarks`` ``scripts/tf_cnn_benchmarks/models/inception_model.py``
(``Inceptionv3Model``, built by ``model_config.py`` with its default
``auxiliary=False``, so there is no auxiliary head). Every conv has batch norm
(``cnn.use_batch_norm = True`` with the builder's default config: ``center=True``,
``scale=False``, ``epsilon=1e-3``, ``decay=0.999``) and therefore no bias. Modules
``inception_v3_a`` .. ``_e`` keep the benchmark's column order; the ``share`` columns of
``inception_v3_e`` reuse the tensor of the column to their left, so that module
concatenates six outputs. The head is an 8x8/1 VALID average pool and the linear
``logits`` layer (no dropout). Image size 299, default batch size 32.

Layer names follow the TF-slim / Keras ``InceptionV3`` scheme (``conv_1a_3x3``,
``mixed_5b`` .. ``mixed_7c``); each conv is ``<base>_conv``, ``<base>_bn``, ``<base>_relu``.
"""

from __future__ import annotations

import keras
from keras import layers

from ralp.models._blocks import (
    BENCHMARK_BN,
    classifier,
    conv_bn,
    final_avg_pool,
    image_input,
)

# VALID ops: conv_1a 3x3/2, conv_2a 3x3, pool_3a 3x3/2, conv_4a 3x3, pool_5a 3x3/2,
# mixed_6a 3x3/2, mixed_7a 3x3/2. mixed_7a needs >= 3 -> mixed_6a input >= 7 ->
# pool_5a input >= 15 -> conv_4a input >= 17 -> pool_3a input >= 35 -> conv_2a input
# >= 37 -> conv_1a: 3 + 2 * 36 = 75.
# So the smallest image is 75 (ralp.models.zoo).
FINAL_POOL = 8  # cnn.apool(8, 8, 1, 1, 'VALID')


def _cbr(
    x: keras.KerasTensor,
    filters: int,
    kernel: int | tuple[int, int],
    name: str,
    strides: int = 1,
    padding: str = "same",
) -> keras.KerasTensor:
    return conv_bn(
        x,
        filters,
        kernel,
        strides=strides,
        padding=padding,
        bn=BENCHMARK_BN,
        conv_name=f"{name}_conv",
        bn_name=f"{name}_bn",
        relu_name=f"{name}_relu",
    )


def _concat(name: str, columns: list[keras.KerasTensor]) -> keras.KerasTensor:
    return layers.Concatenate(axis=-1, name=name)(columns)


def inception_v3_a(x: keras.KerasTensor, name: str, pool_filters: int) -> keras.KerasTensor:
    b1 = _cbr(x, 64, 1, f"{name}_branch1x1")
    b2 = _cbr(x, 48, 1, f"{name}_branch5x5_1")
    b2 = _cbr(b2, 64, 5, f"{name}_branch5x5_2")
    b3 = _cbr(x, 64, 1, f"{name}_branch3x3dbl_1")
    b3 = _cbr(b3, 96, 3, f"{name}_branch3x3dbl_2")
    b3 = _cbr(b3, 96, 3, f"{name}_branch3x3dbl_3")
    b4 = layers.AveragePooling2D(3, strides=1, padding="same", name=f"{name}_pool")(x)
    b4 = _cbr(b4, pool_filters, 1, f"{name}_branch_pool")
    return _concat(name, [b1, b2, b3, b4])


def inception_v3_b(x: keras.KerasTensor, name: str) -> keras.KerasTensor:
    b1 = _cbr(x, 384, 3, f"{name}_branch3x3", strides=2, padding="valid")
    b2 = _cbr(x, 64, 1, f"{name}_branch3x3dbl_1")
    b2 = _cbr(b2, 96, 3, f"{name}_branch3x3dbl_2")
    b2 = _cbr(b2, 96, 3, f"{name}_branch3x3dbl_3", strides=2, padding="valid")
    b3 = layers.MaxPooling2D(3, strides=2, padding="valid", name=f"{name}_pool")(x)
    return _concat(name, [b1, b2, b3])


def inception_v3_c(x: keras.KerasTensor, name: str, n: int) -> keras.KerasTensor:
    b1 = _cbr(x, 192, 1, f"{name}_branch1x1")
    b2 = _cbr(x, n, 1, f"{name}_branch7x7_1")
    b2 = _cbr(b2, n, (1, 7), f"{name}_branch7x7_2")
    b2 = _cbr(b2, 192, (7, 1), f"{name}_branch7x7_3")
    b3 = _cbr(x, n, 1, f"{name}_branch7x7dbl_1")
    b3 = _cbr(b3, n, (7, 1), f"{name}_branch7x7dbl_2")
    b3 = _cbr(b3, n, (1, 7), f"{name}_branch7x7dbl_3")
    b3 = _cbr(b3, n, (7, 1), f"{name}_branch7x7dbl_4")
    b3 = _cbr(b3, 192, (1, 7), f"{name}_branch7x7dbl_5")
    b4 = layers.AveragePooling2D(3, strides=1, padding="same", name=f"{name}_pool")(x)
    b4 = _cbr(b4, 192, 1, f"{name}_branch_pool")
    return _concat(name, [b1, b2, b3, b4])


def inception_v3_d(x: keras.KerasTensor, name: str) -> keras.KerasTensor:
    b1 = _cbr(x, 192, 1, f"{name}_branch3x3_1")
    b1 = _cbr(b1, 320, 3, f"{name}_branch3x3_2", strides=2, padding="valid")
    b2 = _cbr(x, 192, 1, f"{name}_branch7x7x3_1")
    b2 = _cbr(b2, 192, (1, 7), f"{name}_branch7x7x3_2")
    b2 = _cbr(b2, 192, (7, 1), f"{name}_branch7x7x3_3")
    b2 = _cbr(b2, 192, 3, f"{name}_branch7x7x3_4", strides=2, padding="valid")
    b3 = layers.MaxPooling2D(3, strides=2, padding="valid", name=f"{name}_pool")(x)
    return _concat(name, [b1, b2, b3])


def inception_v3_e(x: keras.KerasTensor, name: str, pooltype: str) -> keras.KerasTensor:
    b1 = _cbr(x, 320, 1, f"{name}_branch1x1")
    shared = _cbr(x, 384, 1, f"{name}_branch3x3_1")
    b2 = _cbr(shared, 384, (1, 3), f"{name}_branch3x3_2a")
    b3 = _cbr(shared, 384, (3, 1), f"{name}_branch3x3_2b")  # ('share',)
    shared = _cbr(x, 448, 1, f"{name}_branch3x3dbl_1")
    shared = _cbr(shared, 384, 3, f"{name}_branch3x3dbl_2")
    b4 = _cbr(shared, 384, (1, 3), f"{name}_branch3x3dbl_3a")
    b5 = _cbr(shared, 384, (3, 1), f"{name}_branch3x3dbl_3b")  # ('share',), ('share',)
    pool = layers.MaxPooling2D if pooltype == "max" else layers.AveragePooling2D
    b6 = pool(3, strides=1, padding="same", name=f"{name}_pool")(x)
    b6 = _cbr(b6, 192, 1, f"{name}_branch_pool")
    return _concat(name, [b1, b2, b3, b4, b5, b6])


def build_inception3(
    num_classes: int, image_size: int, model_name: str = "inception3"
) -> keras.Model:
    """``Inceptionv3Model.add_inference`` plus the benchmark's linear ``logits`` layer."""
    inputs = image_input(image_size)
    x = _cbr(inputs, 32, 3, "conv_1a_3x3", strides=2, padding="valid")
    x = _cbr(x, 32, 3, "conv_2a_3x3", padding="valid")
    x = _cbr(x, 64, 3, "conv_2b_3x3")
    x = layers.MaxPooling2D(3, strides=2, padding="valid", name="pool_3a_3x3")(x)
    x = _cbr(x, 80, 1, "conv_3b_1x1", padding="valid")
    x = _cbr(x, 192, 3, "conv_4a_3x3", padding="valid")
    x = layers.MaxPooling2D(3, strides=2, padding="valid", name="pool_5a_3x3")(x)
    x = inception_v3_a(x, "mixed_5b", 32)
    x = inception_v3_a(x, "mixed_5c", 64)
    x = inception_v3_a(x, "mixed_5d", 64)
    x = inception_v3_b(x, "mixed_6a")
    x = inception_v3_c(x, "mixed_6b", 128)
    x = inception_v3_c(x, "mixed_6c", 160)
    x = inception_v3_c(x, "mixed_6d", 160)
    x = inception_v3_c(x, "mixed_6e", 192)
    x = inception_v3_d(x, "mixed_7a")
    x = inception_v3_e(x, "mixed_7b", "avg")
    x = inception_v3_e(x, "mixed_7c", "max")
    x = final_avg_pool(x, FINAL_POOL, name="avg_pool")
    outputs = classifier(x, num_classes)
    return keras.Model(inputs, outputs, name=model_name)
