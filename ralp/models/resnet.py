"""ResNet-50 v1 as in the TF CNN benchmark (``--model=resnet50``).

Mirrors ``tensorflow/benchmarks`` ``scripts/tf_cnn_benchmarks/models/resnet_model.py``:
``model_config.py`` maps ``'resnet50'`` to ``create_resnet50_model`` =
``ResnetModel('resnet50', (3, 4, 6, 3))``, version ``'v1'`` (not ``'resnet50_v1.5'``), so
each block is ``bottleneck_block_v1``: the stride sits on the block's first 1x1 conv,
the 3x3 conv is ``SAME_RESNET`` with stride 1 (= ``SAME``), a projection shortcut
(1x1 conv + BN, no relu) is used when the channel count changes, and the output is
``relu(shortcut + res)``. Every conv has batch norm and no bias; batch norm is
``{'decay': 0.9, 'epsilon': 1e-5, 'scale': True}`` with ``center=True``. The stem is a
7x7/2 ``SAME_RESNET`` conv (explicit 3/3 zero padding, then VALID) + BN + relu and a
3x3/2 SAME max pool; the head is ``cnn.spatial_mean()`` (a global average) and the linear
``logits`` layer. Image size 224, default batch size 64.

Layer names: stem ``conv1_pad``, ``conv1``, ``conv1_bn``, ``conv1_relu``, ``pool1``;
blocks ``stage{2..5}_block{i}_{conv1,bn1,relu1,conv2,bn2,relu2,conv3,bn3}``,
``..._shortcut_conv``/``_shortcut_bn``, ``..._add`` and ``..._relu``.
"""

from __future__ import annotations

import keras
from keras import layers

from ralp.models._blocks import RESNET_BN, classifier, conv_bn, image_input

# Every op either is SAME or pads explicitly (stem 7x7/2: pad 3+3 then VALID keeps
# ceil(n / 2)), and the head is a global mean, so any image size >= 1 builds. (The
# benchmark has no fixed-window final pool here: it uses cnn.spatial_mean().)
# So the smallest image is 1 (ralp.models.zoo).
# (depth, depth_bottleneck, number of blocks); stage 2 starts with stride 1, others 2.
STAGES = ((256, 64, 3), (512, 128, 4), (1024, 256, 6), (2048, 512, 3))


def bottleneck_block_v1(
    x: keras.KerasTensor, depth: int, depth_bottleneck: int, stride: int, name: str
) -> keras.KerasTensor:
    """``bottleneck_block_v1(cnn, depth, depth_bottleneck, stride)``."""
    in_size = int(x.shape[-1])
    if depth == in_size:
        if stride == 1:
            shortcut = x
        else:
            shortcut = layers.AveragePooling2D(1, strides=stride, name=f"{name}_shortcut_pool")(x)
    else:
        shortcut = conv_bn(
            x,
            depth,
            1,
            strides=stride,
            bn=RESNET_BN,
            conv_name=f"{name}_shortcut_conv",
            bn_name=f"{name}_shortcut_bn",
            relu_name=None,
        )
    res = x
    for i, (filters, kernel, strides) in enumerate(
        ((depth_bottleneck, 1, stride), (depth_bottleneck, 3, 1), (depth, 1, 1)), 1
    ):
        res = conv_bn(
            res,
            filters,
            kernel,
            strides=strides,
            bn=RESNET_BN,
            conv_name=f"{name}_conv{i}",
            bn_name=f"{name}_bn{i}",
            relu_name=f"{name}_relu{i}" if i < 3 else None,  # conv3: activation=None
        )
    x = layers.Add(name=f"{name}_add")([shortcut, res])
    return layers.Activation("relu", name=f"{name}_relu")(x)


def build_resnet50(num_classes: int, image_size: int, model_name: str = "resnet50") -> keras.Model:
    """``ResnetModel.add_inference`` (v1, layer counts 3/4/6/3) plus ``logits``."""
    inputs = image_input(image_size)
    x = layers.ZeroPadding2D(3, name="conv1_pad")(inputs)  # SAME_RESNET, stride 2
    x = conv_bn(
        x,
        64,
        7,
        strides=2,
        padding="valid",
        bn=RESNET_BN,
        conv_name="conv1",
        bn_name="conv1_bn",
        relu_name="conv1_relu",
    )
    x = layers.MaxPooling2D(3, strides=2, padding="same", name="pool1")(x)
    for stage, (depth, bottleneck, blocks) in enumerate(STAGES, start=2):
        for block in range(1, blocks + 1):
            stride = 2 if block == 1 and stage > 2 else 1
            x = bottleneck_block_v1(x, depth, bottleneck, stride, f"stage{stage}_block{block}")
    # cnn.spatial_mean(): mean over H and W (keepdims so that "flatten" is the reshape).
    x = layers.GlobalAveragePooling2D(keepdims=True, name="avg_pool")(x)
    outputs = classifier(x, num_classes)
    return keras.Model(inputs, outputs, name=model_name)
