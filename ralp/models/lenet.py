"""LeNet-5 as in the TF CNN benchmark (``--model=lenet``).

Mirrors ``tensorflow/benchmarks`` ``scripts/tf_cnn_benchmarks/models/lenet_model.py``
(``Lenet5Model``, which "matches TF's MNIST tutorial model"): two 5x5 SAME convs (32, 64)
each followed by a 2x2/2 max pool, one FC-512 with relu, no dropout. Image size 28
(with the benchmark's 3 input channels), default batch size 32.
"""

from __future__ import annotations

import keras
from keras import layers

from ralp.models._blocks import classifier, conv, image_input

# Only the two 2x2/2 VALID pools shrink the map: pool2 needs >= 2 -> image >= 4.
# So the smallest image is 4 (ralp.models.zoo).


def build_lenet(num_classes: int, image_size: int, model_name: str = "lenet") -> keras.Model:
    """``Lenet5Model.add_inference`` plus the benchmark's linear ``logits`` layer."""
    inputs = image_input(image_size)
    x = conv(inputs, 32, 5, name="conv1")
    x = layers.MaxPooling2D(2, strides=2, padding="valid", name="pool1")(x)
    x = conv(x, 64, 5, name="conv2")
    x = layers.MaxPooling2D(2, strides=2, padding="valid", name="pool2")(x)
    outputs = classifier(x, num_classes, hidden=(512,), first_index=3)
    return keras.Model(inputs, outputs, name=model_name)
