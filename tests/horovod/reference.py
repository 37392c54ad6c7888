"""The single-process reference the Horovod tests compare with: lenet on the digits, trained
with plain Keras on the concatenated batch of all data-reading ranks."""

from __future__ import annotations

IMAGE_SIZE = 28


def train_on_concatenated_batches(initial: list, optimizer, steps: int, rows_per_step: int):
    """Train lenet from ``initial`` for ``steps`` steps on consecutive blocks of
    ``rows_per_step`` digits; returns (weights, per-step losses)."""
    import keras
    import tensorflow as tf

    from ralp.models import build_model
    from ralp.models.digits import digits_arrays, to_model_input

    model = build_model("lenet", num_classes=10, image_size=IMAGE_SIZE)
    model.set_weights(initial)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    images, labels = digits_arrays(seed=0)
    losses = []
    for k in range(steps):
        rows = slice(k * rows_per_step, (k + 1) * rows_per_step)
        x, y = to_model_input(images[rows], IMAGE_SIZE), labels[rows]
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        losses.append(float(loss))
    return model.get_weights(), losses
