"""AlexNet as in the TF CNN benchmark (``--model=alexnet``, ImageNet variant).

Mirrors ``tensorflow/benchmarks`` ``scripts/tf_cnn_benchmarks/models/alexnet_model.py``
(``AlexnetModel``): the "one weird trick" single-tower AlexNet with 64/192/384/384/256
filters, no LRN, no batch norm, image size 224 + 3 (the first conv is ``VALID``), default
batch size 512.
"""

from __future__ import annotations

import keras
from keras import layers

from ralp.models._blocks import classifier, conv, image_input

# conv1 11x11/4 VALID -> pool1 3x3/2 -> pool2 3x3/2 -> pool5 3x3/2 (others SAME).
# pool5 needs >= 3 -> pool2 input >= 7 -> pool1 input >= 15 -> 11 + 4 * 14 = 67.
# So the smallest image is 67 (ralp.models.zoo).


def build_alexnet(num_classes: int, image_size: int, model_name: str = "alexnet") -> keras.Model:
    """``AlexnetModel.add_inference`` plus the benchmark's linear ``logits`` layer."""
    inputs = image_input(image_size)
    x = conv(inputs, 64, 11, strides=4, padding="valid", name="conv1")
    x = layers.MaxPooling2D(3, strides=2, padding="valid", name="pool1")(x)
    x = conv(x, 192, 5, name="conv2")
    x = layers.MaxPooling2D(3, strides=2, padding="valid", name="pool2")(x)
    x = conv(x, 384, 3, name="conv3")
    x = conv(x, 384, 3, name="conv4")
    x = conv(x, 256, 3, name="conv5")
    x = layers.MaxPooling2D(3, strides=2, padding="valid", name="pool5")(x)
    outputs = classifier(x, num_classes, hidden=(4096, 4096), dropout=0.5)
    return keras.Model(inputs, outputs, name=model_name)
