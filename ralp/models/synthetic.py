"""Synthetic ImageNet-like batches, made on each worker (as tf_cnn_benchmarks' synthetic data).

One random batch is generated once per worker and repeated, so the input pipeline costs
nothing and sends nothing over the network: what is measured is training, not data loading.
"""

from __future__ import annotations


def synthetic_dataset_fn(image_size: int, batch_size: int, num_classes: int, seed: int = 0,
                         channels: int = 3, inputs=None, image_key: str | None = None):
    """A per-worker dataset function: an endless dataset of one fixed random batch of
    ``image_size`` x ``image_size`` x ``channels`` images. ``inputs`` (a model of several
    inputs: ``(key, per-sample shape, dtype)`` of each): features as a dict by key, the
    images under ``image_key``, the other inputs random values in [0, 1) (0 for integers:
    an id every embedding has)."""
    import tensorflow as tf

    def dataset_fn(_context=None):
        images = tf.random.stateless_uniform((batch_size, image_size, image_size, channels),
                                             (seed, 1))
        labels = tf.random.stateless_uniform(
            (batch_size,), (seed, 2), maxval=num_classes, dtype=tf.int32
        )
        if inputs is None:
            return tf.data.Dataset.from_tensors((images, labels)).repeat()
        features = {}
        for k, (key, shape, dtype) in enumerate(inputs):
            dtype = tf.as_dtype(dtype)
            features[key] = images if key == image_key else (
                tf.cast(tf.random.stateless_uniform((batch_size, *shape), (seed, 3 + k)), dtype)
                if dtype.is_floating else tf.zeros((batch_size, *shape), dtype))
        return tf.data.Dataset.from_tensors((features, labels)).repeat()

    return dataset_fn
