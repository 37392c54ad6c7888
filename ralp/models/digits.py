"""Real data without a download: scikit-learn's handwritten digits, shaped for the zoo models.

``sklearn.datasets.load_digits`` ships inside scikit-learn (1,797 8x8 grey images, 10
classes). The zoo models take ``image_size`` x ``image_size`` x 3 inputs, so each image is
scaled to [0, 1], resized (bilinear) and repeated over three channels, one batch at a time
inside the input pipeline (a resized copy of the whole set would not fit at 224 px).
"""

from __future__ import annotations

from ralp.errors import InvalidArgumentError

NUM_CLASSES = 10


def digits_arrays(seed: int = 0):
    """(images, labels): float32 (1797, 8, 8, 1) in [0, 1] and int32 (1797,), shuffled with
    ``seed`` (the same order on every process that asks with the same seed)."""
    import numpy as np
    from sklearn.datasets import load_digits

    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)[..., None]
    labels = data.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(labels))
    return images[order], labels[order]


def to_model_input(images, image_size: int):
    """8x8x1 digit images -> ``image_size`` x ``image_size`` x 3 model inputs (a tf op)."""
    import tensorflow as tf

    resized = tf.image.resize(images, (image_size, image_size), method="bilinear")
    return tf.repeat(resized, 3, axis=-1)


def digits_batches(
    image_size: int, batch_size: int, *, shard: int = 0, num_shards: int = 1, seed: int = 0
):
    """An endless ``tf.data`` dataset of (images, labels) batches of this shard's digits.

    Shard ``k`` of ``n`` takes every n-th example starting at k, so workers (or Horovod ranks)
    see disjoint data; each pass is reshuffled.
    """
    import tensorflow as tf

    if not 0 <= shard < num_shards:
        raise InvalidArgumentError(f"shard must be in [0, {num_shards}), got {shard}")
    images, labels = digits_arrays(seed)
    images, labels = images[shard::num_shards], labels[shard::num_shards]
    if len(labels) < batch_size:
        raise InvalidArgumentError(
            f"a digits shard has {len(labels)} examples, fewer than the batch size {batch_size}"
        )
    return (
        tf.data.Dataset.from_tensor_slices((images, labels))
        .shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(batch_size, drop_remainder=True)
        .map(lambda x, y: (to_model_input(x, image_size), y))
        .prefetch(2)
    )


def digits_dataset_fn(image_size: int, batch_size: int, seed: int = 0):
    """A per-worker dataset function for ParameterServerStrategy: each input pipeline (worker)
    reads its own shard of the digits."""

    def dataset_fn(context=None):
        shard, shards = 0, 1
        if context is not None:
            shard, shards = context.input_pipeline_id, context.num_input_pipelines
        return digits_batches(image_size, batch_size, shard=shard, num_shards=shards, seed=seed)

    return dataset_fn
