"""GoogLeNet (Inception v1) as in the TF CNN benchmark (``--model=googlenet``).

Mirrors ``tensorflow/benchmarks`` ``scripts/tf_cnn_benchmarks/models/googlenet_model.py``
(``GooglenetModel``): plain convs with bias and relu (no batch norm, no LRN), 3x3/2 SAME
max pools, nine ``inception_v1`` modules (columns 1x1 | 1x1->3x3 | 1x1->5x5 |
3x3/1 max pool->1x1, concatenated in that order), a final 7x7/1 VALID average pool and no
dropout and no auxiliary heads. Image size 224, default batch size 32.
"""

from __future__ import annotations

import keras
from keras import layers

from ralp.models._blocks import classifier, conv, final_avg_pool, image_input

# Every conv and max pool is SAME, so any image size >= 1 keeps a map >= 1x1; the final
# average pool is clipped to the remaining map (see _blocks.final_avg_pool).
# So the smallest image is 1 (ralp.models.zoo).
FINAL_POOL = 7  # cnn.apool(7, 7, 1, 1, mode='VALID')

# inception_v1(cnn, k, l, m, n, p, q) arguments, by the paper's module names.
MODULES = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


def inception_v1(
    x: keras.KerasTensor,
    name: str,
    n1x1: int,
    n3x3_reduce: int,
    n3x3: int,
    n5x5_reduce: int,
    n5x5: int,
    pool_proj: int,
) -> keras.KerasTensor:
    """``inception_v1(cnn, k, l, m, n, p, q)``: four columns concatenated on channels."""
    pre = f"inception_{name}"
    b1 = conv(x, n1x1, 1, name=f"{pre}_branch1x1_conv")
    b2 = conv(x, n3x3_reduce, 1, name=f"{pre}_branch3x3_reduce_conv")
    b2 = conv(b2, n3x3, 3, name=f"{pre}_branch3x3_conv")
    b3 = conv(x, n5x5_reduce, 1, name=f"{pre}_branch5x5_reduce_conv")
    b3 = conv(b3, n5x5, 5, name=f"{pre}_branch5x5_conv")
    b4 = layers.MaxPooling2D(3, strides=1, padding="same", name=f"{pre}_pool")(x)
    b4 = conv(b4, pool_proj, 1, name=f"{pre}_branch_pool_conv")
    return layers.Concatenate(axis=-1, name=f"{pre}_concat")([b1, b2, b3, b4])


def build_googlenet(
    num_classes: int, image_size: int, model_name: str = "googlenet"
) -> keras.Model:
    """``GooglenetModel.add_inference`` plus the benchmark's linear ``logits`` layer."""
    inputs = image_input(image_size)
    x = conv(inputs, 64, 7, strides=2, name="conv1")
    x = layers.MaxPooling2D(3, strides=2, padding="same", name="pool1")(x)
    x = conv(x, 64, 1, name="conv2_reduce")
    x = conv(x, 192, 3, name="conv2")
    x = layers.MaxPooling2D(3, strides=2, padding="same", name="pool2")(x)
    for module, args in MODULES.items():
        if module in ("4a", "5a"):
            stage = int(module[0]) - 1
            x = layers.MaxPooling2D(3, strides=2, padding="same", name=f"pool{stage}")(x)
        x = inception_v1(x, module, *args)
    x = final_avg_pool(x, FINAL_POOL, name="pool5")
    outputs = classifier(x, num_classes)
    return keras.Model(inputs, outputs, name=model_name)
