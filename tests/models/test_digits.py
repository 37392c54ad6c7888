"""Real data from scikit-learn's digits: shapes, value range, shards, the PSS dataset function."""

import numpy as np
import pytest

from ralp.models.digits import digits_arrays, digits_batches, digits_dataset_fn, to_model_input


def test_arrays_are_the_digits_scaled_and_shuffled_by_seed():
    from sklearn.datasets import load_digits

    images, labels = digits_arrays(seed=0)
    assert images.shape == (1797, 8, 8, 1) and images.dtype == np.float32
    assert images.min() >= 0.0 and images.max() == 1.0
    raw = load_digits()
    # the same multiset of (image, label) pairs, in another order
    assert sorted(labels.tolist()) == sorted(raw.target.tolist())
    assert np.array_equal(np.sort(images.reshape(1797, -1).sum(1)),
                          np.sort((raw.images / 16.0).reshape(1797, -1).sum(1)).astype(np.float32))
    again, _ = digits_arrays(seed=0)
    other, _ = digits_arrays(seed=1)
    assert np.array_equal(images, again) and not np.array_equal(images, other)


def test_model_input_is_resized_to_three_equal_channels():
    images, _ = digits_arrays()
    x = to_model_input(images[:4], 32).numpy()
    assert x.shape == (4, 32, 32, 3)
    assert np.array_equal(x[..., 0], x[..., 2])
    # bilinear resizing keeps the mean brightness close
    np.testing.assert_allclose(x[..., 0].mean(axis=(1, 2)), images[:4].mean(axis=(1, 2, 3)),
                               rtol=0.1)


def test_shards_are_disjoint_and_batches_come_from_their_shard():
    images, labels = digits_arrays()
    x, y = next(iter(digits_batches(8, 16, shard=1, num_shards=3)))
    assert x.shape == (16, 8, 8, 3) and y.shape == (16,)
    shard = images[1::3, :, :, 0]
    for img in x.numpy()[..., 0]:  # at 8 px the "resize" is the identity
        assert np.any(np.all(np.isclose(shard, img), axis=(1, 2)))
    with pytest.raises(ValueError, match="shard must be in"):
        digits_batches(8, 16, shard=3, num_shards=3)
    with pytest.raises(ValueError, match="fewer than the batch size"):
        digits_batches(8, 1000, shard=0, num_shards=2)


def test_dataset_fn_reads_the_input_pipelines_shard():
    import tensorflow as tf

    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
    _, labels = digits_arrays(seed=0)
    shard = labels[1::2]
    assert len(shard) == 898
    _, y = next(iter(digits_dataset_fn(8, 898, seed=0)(context)))  # one batch: the whole shard
    assert sorted(y.numpy().tolist()) == sorted(shard.tolist())
