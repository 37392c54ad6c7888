"""OverFeat (fast model) as in the TF CNN benchmark (``--model=overfeat``).

Mirrors ``tensorflow/benchmarks`` ``scripts/tf_cnn_benchmarks/models/overfeat_model.py``
(``OverfeatModel``): convs 96 (11x11/4 VALID), 256 (5x5 VALID), 512, 1024, 1024 (3x3
SAME), 2x2/2 max pools after conv1, conv2 and conv5, FC 3072 and 4096 with dropout 0.5.
Image size 231, default batch size 32.
"""

from __future__ import annotations

import keras
from keras import layers

from ralp.models._blocks import classifier, conv, image_input

# pool5 needs >= 2 -> conv5..3 (SAME) >= 2 -> pool2 input >= 4 -> conv2 (5x5 VALID)
# input >= 8 -> pool1 input >= 16 -> conv1: 11 + 4 * 15 = 71.
# So the smallest image is 71 (ralp.models.zoo).


def build_overfeat(num_classes: int, image_size: int, model_name: str = "overfeat") -> keras.Model:
    """``OverfeatModel.add_inference`` plus the benchmark's linear ``logits`` layer."""
    inputs = image_input(image_size)
    x = conv(inputs, 96, 11, strides=4, padding="valid", name="conv1")
    x = layers.MaxPooling2D(2, strides=2, padding="valid", name="pool1")(x)
    x = conv(x, 256, 5, padding="valid", name="conv2")
    x = layers.MaxPooling2D(2, strides=2, padding="valid", name="pool2")(x)
    x = conv(x, 512, 3, name="conv3")
    x = conv(x, 1024, 3, name="conv4")
    x = conv(x, 1024, 3, name="conv5")
    x = layers.MaxPooling2D(2, strides=2, padding="valid", name="pool5")(x)
    outputs = classifier(x, num_classes, hidden=(3072, 4096), dropout=0.5)
    return keras.Model(inputs, outputs, name=model_name)
