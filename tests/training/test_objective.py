"""The loss and metrics as sums (ralp.training.objective) against Keras on the whole batch:
split a batch into parts (uneven, one empty), add the parts' sums, and compare with Keras'
loss, gradient and metrics computed on the whole batch at once."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from ralp.training.compile import TrainingSetupError
from ralp.training.objective import EpochSums, Objective, spec_of, step_loss

ROWS, CLASSES = 12, 5
PARTS = [(0, 5), (5, 9), (9, 9), (9, 12)]  # uneven, and one worker with no rows


def _data(kind: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(ROWS, CLASSES)).astype("float32")
    labels = rng.integers(0, CLASSES, ROWS)
    if kind == "sparse":
        return labels.astype("int32"), logits
    if kind == "onehot":
        return np.eye(CLASSES, dtype="float32")[labels], logits
    return (labels % 2).astype("float32")[:, None], logits[:, :1]  # binary


def _summed(objective, y, pred, weights=None):
    total = np.zeros(objective.width)
    for a, b in PARTS:
        w = None if weights is None else weights[a:b]
        total += objective.batch_sums(y[a:b], pred[a:b], w, share=1 / len(PARTS)).numpy()
    return total


# (labels, loss as compiled, metrics, the Keras loss it means, predictions are probabilities)
CASES = [
    ("sparse", keras.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"],
     keras.losses.SparseCategoricalCrossentropy(from_logits=True), False),
    ("onehot", "categorical_crossentropy", ["accuracy", keras.metrics.AUC(name="auc")],
     keras.losses.CategoricalCrossentropy(), True),
    ("binary", keras.losses.BinaryCrossentropy(from_logits=True), ["accuracy", "precision"],
     keras.losses.BinaryCrossentropy(from_logits=True), False),
    ("sparse", "crossentropy", ["acc", keras.metrics.SparseTopKCategoricalAccuracy(k=2)],
     keras.losses.SparseCategoricalCrossentropy(), True),
]


@pytest.mark.parametrize(("kind", "loss", "metrics", "keras_loss", "probabilities"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.parametrize("weighted", [False, True])
def test_parts_add_up_to_keras_on_the_whole_batch(kind, loss, metrics, keras_loss, probabilities,
                                                  weighted):
    y, pred = _data(kind)
    if probabilities:
        pred = keras.ops.softmax(pred).numpy()
    weights = np.linspace(0.5, 2.0, ROWS).astype("float32") if weighted else None
    objective = Objective(loss, [] if weighted else metrics, metrics if weighted else [],
                          y_spec=spec_of((None, *y.shape[1:]), y.dtype),
                          pred_spec=spec_of((None, *pred.shape[1:]), "float32"))
    total = _summed(objective, y, pred, weights)
    expected = float(keras_loss(y, pred, sample_weight=weights))
    assert step_loss(total) == pytest.approx(expected, rel=1e-5)
    sums = EpochSums(objective)
    sums.add(total)
    logs = sums.logs()
    for name, value in logs.items():
        if name == "loss":
            continue
        metric = next(m for m in objective.metrics.metrics if m.name == name.removeprefix(
            "weighted_"))
        fresh = metric.__class__.from_config(metric.get_config())
        fresh.update_state(y, pred, sample_weight=weights)
        assert value == pytest.approx(float(fresh.result()), rel=1e-5), name
    assert list(logs) == objective.names


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "mean_with_sample_weight"])
def test_the_gradient_of_the_parts_is_keras_gradient(reduction):
    y, _ = _data("sparse")
    x = np.random.default_rng(1).normal(size=(ROWS, 3)).astype("float32")
    kernel = tf.Variable(np.random.default_rng(2).normal(size=(3, CLASSES)).astype("float32"))
    weights = np.linspace(0.5, 2.0, ROWS).astype("float32")
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)
    objective = Objective(loss, y_spec=spec_of((None,), "int32"),
                          pred_spec=spec_of((None, CLASSES), "float32"))
    with tf.GradientTape() as tape:
        whole = loss(y, x @ kernel, sample_weight=weights)
    expected = tape.gradient(whole, kernel).numpy()
    grads, den = [], 0.0
    for a, b in PARTS:
        with tf.GradientTape() as tape:
            num, d = objective.loss_sums(y[a:b], x[a:b] @ kernel, weights[a:b], share=0.25)
        grads.append(tape.gradient(num, kernel).numpy())
        den += float(d)
    np.testing.assert_allclose(sum(grads) / den, expected, rtol=1e-5, atol=1e-7)


def test_an_unreduced_loss_is_refused():
    with pytest.raises(TrainingSetupError, match="reduction"):
        Objective(keras.losses.MeanSquaredError(reduction=None), y_spec=spec_of((None, 1), "float32"),
                  pred_spec=spec_of((None, 1), "float32"))


@pytest.mark.parametrize("metric", [
    keras.metrics.AUC(num_thresholds=20), keras.metrics.Precision(), keras.metrics.Recall(),
    keras.metrics.MeanIoU(num_classes=2), keras.metrics.MeanSquaredError(),
    keras.metrics.MeanAbsoluteError(), keras.metrics.BinaryAccuracy(),
], ids=lambda m: m.name)
def test_built_in_metric_states_add(metric):
    """Every metric in the list accumulates sums: two halves' states add up to the whole's."""
    rng = np.random.default_rng(3)
    y = (rng.random((16, 1)) > 0.5).astype("float32")
    pred = rng.random((16, 1)).astype("float32")
    if isinstance(metric, keras.metrics.MeanIoU):
        pred = (pred > 0.5).astype("float32")
    initial = [tf.convert_to_tensor(v.numpy()) for v in metric.variables]
    assert all(not np.any(v) for v in initial)  # the sums start at zero
    halves = [metric.stateless_update_state(initial, y[a:b], pred[a:b]) for a, b in ((0, 7), (7, 16))]
    added = [a + b for a, b in zip(*halves, strict=True)]
    whole = metric.stateless_update_state(initial, y, pred)
    assert float(metric.stateless_result(added)) == pytest.approx(
        float(metric.stateless_result(whole)), rel=1e-6)


def test_a_softmax_output_split_over_workers_keeps_keras_unclipped_loss():
    """Keras computes a softmax output's cross-entropy from its logits (unclipped); a
    worker's own rows of its output must too, or a batch with confident mistakes reports
    and trains on clipped probabilities (losses over 16 become 16.1)."""
    from ralp.training.data import own

    logits = np.array([[40.0, 0, 0], [0, 0, 1], [0, 35.0, 0], [2, 1, 0]], "float32")
    y = np.array([1, 2, 0, 0], "int32")
    loss = keras.losses.SparseCategoricalCrossentropy()
    objective = Objective(loss, y_spec=spec_of((None,), "int32"),
                          pred_spec=spec_of((None, 3), "float32"))
    expected = float(loss(y, keras.activations.softmax(tf.constant(logits))))
    assert expected > 18  # two rows far beyond the clip
    num_total = den_total = 0.0
    for a, b in ((0, 2), (2, 4)):  # each worker's forward ends in its own softmax
        predictions = keras.activations.softmax(tf.constant(logits[a:b]))
        yy, pp, _ = own(b - a, y[a:b], predictions, None)
        num, den = objective.loss_sums(yy, pp)
        num_total, den_total = num_total + float(num), den_total + float(den)
    assert num_total / den_total == pytest.approx(expected, rel=1e-5)
