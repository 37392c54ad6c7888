"""A user's own small classifier saved as a ``.keras`` file, as the tests of the bench and
the planner on saved models need one: a convolution, a pooling, two dense layers."""

import keras


def save_small_cnn(folder, name: str, input_shape: tuple[int, int, int], classes: int,
                   filters: int, units: int) -> str:
    """Build ``name``, save it in ``folder`` as ``NAME.keras`` and return the path."""
    inputs = keras.Input(input_shape)
    x = keras.layers.Conv2D(filters, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(units, activation="relu")(x)
    outputs = keras.layers.Dense(classes, activation="softmax")(x)
    path = folder / f"{name}.keras"
    keras.Model(inputs, outputs, name=name).save(path)
    return str(path)
