"""Each worker's share of the data (ralp.training.data), read here the way workers read it."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from ralp.errors import InvalidArgumentError
from ralp.training.compile import TrainingSetupError
from ralp.training.data import Sharding, split_bounds
from ralp.training.fit_inputs import fit_data


def _model(classes=4, shape=(3,)):
    inputs = keras.Input(shape)
    return keras.Model(inputs, keras.layers.Dense(classes)(inputs))


SPARSE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _ids(n, width=3):
    """Images whose first value is the sample's id."""
    x = np.zeros((n, width), np.float32)
    x[:, 0] = np.arange(n)
    return x, (np.arange(n) % 4).astype(np.int32)


def _rows(data, sharding, worker, steps, seed=7, skip=0):
    """The ids of each batch's own rows (a stand-in row left out)."""
    ds = data.worker_dataset(sharding, worker, seed=seed, skip=skip)
    return [[int(v) for v in batch[0][:int(batch[-1]), 0].numpy()] for batch in ds.take(steps)]


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize(("rows", "batch"), [(48, 12), (50, 12), (7, 6), (25, 12)])
@pytest.mark.parametrize("shuffle", [True, False])
def test_a_synchronous_epoch_uses_every_sample_once(workers, rows, batch, shuffle):
    x, y = _ids(rows)
    data = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=batch,
                    steps_per_epoch=None, shuffle=shuffle, model=_model(), loss=SPARSE)
    sharding = Sharding(workers, synchronous=True)
    steps = data.steps_per_epoch(sharding)
    assert steps == -(-rows // batch)
    per_worker = [_rows(data, sharding, w, 2 * steps) for w in range(workers)]
    for epoch in range(2):
        seen = []
        for k in range(epoch * steps, (epoch + 1) * steps):
            step_rows = [per_worker[w][k] for w in range(workers)]
            sizes = [len(r) for r in step_rows]
            assert max(sizes) - min(sizes) <= 1  # split as evenly as possible
            assert sum(sizes) == min(batch, rows - (k - epoch * steps) * batch)
            seen += [i for r in step_rows for i in r]
        assert sorted(seen) == list(range(rows))  # every sample exactly once
    if shuffle:  # a fresh permutation each epoch
        assert per_worker[0][:steps] != per_worker[0][steps:]


def test_the_workers_agree_on_the_permutation_only_through_the_seed():
    x, y = _ids(24)
    data = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=8,
                    steps_per_epoch=None, shuffle=True, model=_model(), loss=SPARSE)
    sharding = Sharding(2, synchronous=True)
    assert _rows(data, sharding, 0, 3, seed=1) == _rows(data, sharding, 0, 3, seed=1)
    assert _rows(data, sharding, 0, 3, seed=1) != _rows(data, sharding, 0, 3, seed=2)


def test_skip_starts_at_the_data_position():
    x, y = _ids(40)
    data = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=8,
                    steps_per_epoch=None, shuffle=True, model=_model(), loss=SPARSE)
    sharding = Sharding(2, synchronous=True)
    assert _rows(data, sharding, 1, 9, skip=3) == _rows(data, sharding, 1, 12)[3:]


def test_drop_remainder_keeps_full_batches():
    x, y = _ids(50)
    data = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=12,
                    steps_per_epoch=None, shuffle=False, model=_model(), loss=SPARSE)
    sharding = Sharding(3, synchronous=True, drop_remainder=True)
    assert data.steps_per_epoch(sharding) == 4
    assert all(len(r) == 4 for w in range(3) for r in _rows(data, sharding, w, 8))


@pytest.mark.parametrize("workers", [2, 3])
def test_asynchronous_workers_are_dealt_one_keras_processs_batches(workers):
    """Batch k of an epoch goes to worker k mod W whole: the same batches as one process (one
    partial batch per epoch, not one per worker), every row once per epoch."""
    x, y = _ids(50)
    data = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=6,
                    steps_per_epoch=None, shuffle=True, model=_model(), loss=SPARSE)
    sharding = Sharding(workers, synchronous=False)
    steps = data.steps_per_epoch(sharding)
    assert steps == 9
    one_process = _rows(data, Sharding(1, synchronous=True), 0, 2 * steps)
    for w in range(workers):
        dealt = len(range(w, steps, workers))
        ours = _rows(data, sharding, w, 2 * dealt)  # two epochs
        theirs = [one_process[e * steps + k] for e in range(2) for k in range(w, steps, workers)]
        assert ours == theirs
    first_epoch = one_process[:steps]
    assert sorted(i for r in first_epoch for i in r) == list(range(50))
    assert [len(r) for r in first_epoch] == [6] * 8 + [2]


def test_a_dataset_is_split_per_global_batch_or_dealt_whole():
    x, y = _ids(30)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(10)
    data = fit_data(ds, None, sample_weight=None, class_weight=None, batch_size=32,
                    steps_per_epoch=None, shuffle=True, model=_model(), loss=SPARSE)
    assert data.steps_per_epoch(Sharding(2, True)) == 3 and data.global_batch == 10
    synced = [_rows(data, Sharding(3, True), w, 3) for w in range(3)]
    assert synced[1][0] == [3, 4, 5] and synced[2][2] == [26, 27, 28, 29]
    dealt = [_rows(data, Sharding(2, False), w, 2) for w in range(2)]
    assert dealt[0][0][0] == 0 and dealt[1][0][0] == 10 and dealt[0][1][0] == 20


def test_class_weight_becomes_sample_weights():
    x, y = _ids(8)
    data = fit_data(x, y, sample_weight=None, class_weight={0: 2.0, 3: 0.5}, batch_size=8,
                    steps_per_epoch=None, shuffle=False, model=_model(), loss=SPARSE)
    batch = next(iter(data.worker_dataset(Sharding(1, True), 0, seed=0)))
    np.testing.assert_allclose(batch[2].numpy(), [2, 1, 1, .5, 2, 1, 1, .5])
    assert int(batch[3]) == 8
    ds = tf.data.Dataset.from_tensor_slices((x, np.eye(4, dtype="float32")[y])).batch(4)
    data = fit_data(ds, None, sample_weight=None, class_weight={1: 3.0}, batch_size=4,
                    steps_per_epoch=None, shuffle=False, model=_model(),
                    loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    batch = next(iter(data.worker_dataset(Sharding(1, True), 0, seed=0)))
    np.testing.assert_allclose(batch[2].numpy(), [1, 3, 1, 1])


@pytest.mark.parametrize(("x", "y", "loss", "match"), [
    (np.zeros((4, 5)), np.zeros(4, int), SPARSE, r"shape \(5,\) per sample.*takes \(3,\)"),
    (np.zeros((4, 3)), np.eye(4)[[0, 1, 2, 3]], SPARSE, "look one-hot"),
    (np.zeros((4, 3)), np.array([0, 1, 2, 4]), SPARSE, r"outside \[0, 4\)"),
    (np.zeros((4, 3)), np.array([0.5, 1, 2, 3]), SPARSE, "integer class ids"),
    (np.zeros((4, 3)), np.array([0, 1, 2, 3]), keras.losses.CategoricalCrossentropy(),
     "look like class ids"),
    (np.full((4, 3), np.nan), np.zeros(4, int), SPARSE, "NaN"),
    (np.zeros((4, 3)), np.zeros(3, int), SPARSE, "4 images, 3 labels"),
])
def test_bad_data_is_refused_before_training(x, y, loss, match):
    with pytest.raises(TrainingSetupError, match=match):
        fit_data(x, y, sample_weight=None, class_weight=None, batch_size=2,
                 steps_per_epoch=None, shuffle=True, model=_model(), loss=loss)


def test_a_dataset_of_unknown_length_needs_steps_per_epoch():
    x, y = _ids(8)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: b >= 0).batch(4)
    with pytest.raises(InvalidArgumentError, match="steps_per_epoch"):
        fit_data(ds, None, sample_weight=None, class_weight=None, batch_size=4,
                 steps_per_epoch=None, shuffle=True, model=_model(), loss=SPARSE)


def test_a_dataset_function_gets_each_workers_input_context():
    seen = []

    def dataset_fn(context):
        seen.append((context.input_pipeline_id, context.num_input_pipelines,
                     context.get_per_replica_batch_size(8)))
        x, y = _ids(16)
        return tf.data.Dataset.from_tensor_slices((x, y)).shard(
            context.num_input_pipelines, context.input_pipeline_id).batch(4)

    data = fit_data(dataset_fn, None, sample_weight=None, class_weight=None, batch_size=8,
                    steps_per_epoch=2, shuffle=True, model=_model(), loss=SPARSE)
    seen.clear()
    rows = _rows(data, Sharding(2, True), 1, 2)
    assert seen == [(1, 2, 4)] and rows[0] == [1, 3, 5, 7]


def test_a_worker_left_no_rows_gets_a_stand_in():
    """A small last batch (1 row of 25 over 3 workers): the others run a stand-in row that
    is none of their own, so no step runs on an empty batch."""
    x, y = _ids(25)
    data = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=12,
                    steps_per_epoch=None, shuffle=False, model=_model(), loss=SPARSE)
    sharding = Sharding(3, synchronous=True)
    for w in range(3):
        last = list(data.worker_dataset(sharding, w, seed=0).take(3))[-1]
        assert len(last[0]) == 1 and int(last[-1]) == (1 if w == 2 else 0)


def test_the_worker_may_be_a_tensor():
    """Under the PS modes' own schedule the worker is known only where the dataset runs."""
    x, y = _ids(30)
    data = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=4,
                    steps_per_epoch=None, shuffle=True, model=_model(), loss=SPARSE)
    for synchronous in (True, False):
        sharding = Sharding(3, synchronous)
        as_int = _rows(data, sharding, 2, 5)
        ds = data.worker_dataset(sharding, tf.constant(2), seed=7)
        as_tensor = [[int(v) for v in b[0][:int(b[-1]), 0]] for b in ds.take(5)]
        assert as_int == as_tensor


def test_split_bounds_cover_the_batch():
    for rows in range(0, 13):
        for workers in (1, 2, 3, 5):
            bounds = [split_bounds(rows, workers, w) for w in range(workers)]
            assert bounds[0][0] == 0 and bounds[-1][1] == rows
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))


def test_stanza_leaves_out_a_partial_last_batch_of_a_dataset_as_of_arrays():
    """With drop_remainder an epoch is one pass's full batches, from arrays and from a
    dataset alike: the partial last batch is left out of both, and each epoch starts a pass."""
    x, y = _ids(50)
    sharding = Sharding(2, synchronous=True, drop_remainder=True)
    of_arrays = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=12,
                         steps_per_epoch=None, shuffle=False, model=_model(), loss=SPARSE)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(12)
    of_dataset = fit_data(dataset, None, sample_weight=None, class_weight=None, batch_size=12,
                          steps_per_epoch=None, shuffle=False, model=_model(), loss=SPARSE)
    assert of_arrays.steps_per_epoch(sharding) == of_dataset.steps_per_epoch(sharding) == 4
    for data in (of_arrays, of_dataset):
        two_epochs = [_rows(data, sharding, w, 8) for w in range(2)]
        firsts = [two_epochs[0][k][0] for k in range(8)]
        assert firsts == [0, 12, 24, 36] * 2  # rows 48, 49 left out; the next pass at once
    # batched with drop_remainder=True: nothing to leave out, known without reading it
    full = tf.data.Dataset.from_tensor_slices((x, y)).batch(12, drop_remainder=True)
    data = fit_data(full, None, sample_weight=None, class_weight=None, batch_size=12,
                    steps_per_epoch=None, shuffle=False, model=_model(), loss=SPARSE)
    assert data.steps_per_epoch(sharding) == 4
    # without drop_remainder every batch trains
    assert of_dataset.steps_per_epoch(Sharding(2, synchronous=True)) == 5
    exact = tf.data.Dataset.from_tensor_slices((x[:48], y[:48])).batch(12)
    data = fit_data(exact, None, sample_weight=None, class_weight=None, batch_size=12,
                    steps_per_epoch=None, shuffle=False, model=_model(), loss=SPARSE)
    assert data.steps_per_epoch(sharding) == 4


def test_too_few_samples_for_one_full_batch_are_said():
    x, y = _ids(5)
    data = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=6,
                    steps_per_epoch=None, shuffle=False, model=_model(), loss=SPARSE)
    with pytest.raises(InvalidArgumentError, match="5 samples make no batch of 6"):
        data.steps_per_epoch(Sharding(2, synchronous=True, drop_remainder=True))


def _two_input_model():
    images = keras.Input((3,), name="images")
    meta = keras.Input((2,), name="meta")
    return keras.Model([images, meta], keras.layers.Dense(4)(keras.layers.Concatenate()(
        [images, meta])))


@pytest.mark.parametrize("synchronous", [True, False])
def test_every_inputs_rows_go_to_a_worker_together(synchronous):
    """Arrays and a dataset of two inputs: each worker's rows of one input are the same rows
    of the other (and of the labels and weights), the stand-in row included."""
    x, y = _ids(25)
    meta = np.stack([x[:, 0], -x[:, 0]], axis=1)
    features = {"meta": meta, "images": x}
    sharding = Sharding(3, synchronous)
    datasets = [fit_data(features, y, sample_weight=np.arange(25, dtype="float32"),
                         class_weight=None, batch_size=12, steps_per_epoch=None, shuffle=True,
                         model=_two_input_model(), loss=SPARSE)]
    batched = tf.data.Dataset.from_tensor_slices((features, y, np.arange(25.0))).batch(12)
    datasets.append(fit_data(batched, None, sample_weight=None, class_weight=None,
                             batch_size=12, steps_per_epoch=None, shuffle=True,
                             model=_two_input_model(), loss=SPARSE))
    for data in datasets:
        seen = []
        for w in range(3):
            for (images, m), labels, weights, rows in data.worker_dataset(
                    sharding, w, seed=3).take(data.steps_per_epoch(sharding)):
                ids = images[:, 0].numpy()
                np.testing.assert_array_equal(m[:, 0], ids)
                np.testing.assert_array_equal(labels, ids.astype(int) % 4)
                np.testing.assert_array_equal(weights, ids)
                seen += list(ids[:int(rows)])
        if synchronous:
            assert sorted(seen) == list(range(25))


def test_arrays_reach_a_workers_dataset_as_its_inputs_not_as_constants_of_its_graph():
    """A parameter-server worker's dataset is a function made on the coordinator and run on the
    worker: the arrays are inputs it captures, not constants of its graph (as constants, each
    worker's graph optimizer went through every byte of them before training began)."""
    x = np.random.default_rng(0).random((256, 16, 16, 3), dtype=np.float32)  # 786 KB
    y = (np.arange(256) % 4).astype(np.int32)
    images = keras.Input((16, 16, 3))
    model = keras.Model(images, keras.layers.Dense(4)(keras.layers.Flatten()(images)))
    data = fit_data(x, y, sample_weight=None, class_weight=None, batch_size=32,
                    steps_per_epoch=None, shuffle=True, model=model, loss=SPARSE)
    fn = tf.function(lambda: data.worker_dataset(Sharding(2, synchronous=False), 0, seed=1,
                                                 remote=True)).get_concrete_function()
    graph = fn.graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    constants = [len(n.attr["value"].tensor.tensor_content) for n in nodes if n.op == "Const"]
    assert max(constants) < 1024
    assert [tuple(t.shape) for t in fn.captured_inputs if t.shape.rank == 4] == [x.shape]
