"""VGG-11/16/19 (configurations A, D, E) as in the TF CNN benchmark.

Mirrors ``tensorflow/benchmarks`` ``scripts/tf_cnn_benchmarks/models/vgg_model.py``
(``_construct_vgg`` with conv counts ``[1, 1, 2, 2, 2]``, ``[2, 2, 3, 3, 3]``,
``[2, 2, 4, 4, 4]``): 3x3 SAME convs with bias and relu (no batch norm), a 2x2/2 max pool
after each of the five blocks, FC 4096-4096 with dropout 0.5. Image size 224, default
batch size 64.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import layers

from ralp.models._blocks import classifier, conv, image_input

BLOCK_FILTERS = (64, 128, 256, 512, 512)
# Five 2x2/2 VALID pools; all convs are SAME: pool5 needs >= 2 -> image >= 2**5.
# So the smallest image is 32 (ralp.models.zoo).


def build_vgg(
    num_classes: int, image_size: int, model_name: str, *, conv_counts: Sequence[int]
) -> keras.Model:
    """``_construct_vgg`` plus the benchmark's linear ``logits`` layer."""
    inputs = image_input(image_size)
    x = inputs
    for block, (filters, count) in enumerate(zip(BLOCK_FILTERS, conv_counts, strict=True), 1):
        for i in range(1, count + 1):
            x = conv(x, filters, 3, name=f"conv{block}_{i}")
        x = layers.MaxPooling2D(2, strides=2, padding="valid", name=f"pool{block}")(x)
    outputs = classifier(x, num_classes, hidden=(4096, 4096), dropout=0.5)
    return keras.Model(inputs, outputs, name=model_name)
