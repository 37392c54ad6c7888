"""CollectiveTrainer on real worker processes (MultiWorkerMirroredStrategy over gRPC on
loopback), against a single-process Keras run of the same model on the concatenated global
batches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ralp.collective.launch import run_workers
from ralp.collective.runtime import CollectiveError, make_strategy
from ralp.errors import InvalidArgumentError

pytestmark = pytest.mark.cluster
HERE = Path(__file__).resolve().parent
STEPS, BATCH = 5, 6


def _keras_reference(initial: list, steps: int, workers: int, optimizer: str):
    """Weights and per-step losses of one process training with ``train_on_batch`` on each
    step's global batch (the workers' batches concatenated)."""
    import keras

    sys.path.insert(0, str(HERE))
    from collective_ranks import build, global_batches

    model = build(optimizer)
    model.set_weights(initial)
    if optimizer != "adam":  # the trainers' default: SGD with momentum
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01, momentum=0.9),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = global_batches(steps, workers, BATCH)
    losses = [float(model.train_on_batch(x[s].reshape(-1, *x.shape[3:]), y[s].reshape(-1)))
              for s in range(steps)]
    return model.get_weights(), losses


def _run(tmp_path, workers: int, optimizer: str) -> list[dict]:
    command = [sys.executable, str(HERE / "collective_ranks.py"), str(tmp_path), str(STEPS),
               str(BATCH), optimizer]
    run_workers(command, workers, timeout=300, env={"CUDA_VISIBLE_DEVICES": "-1"})
    return [dict(np.load(tmp_path / f"worker{k}.npz")) for k in range(workers)]


@pytest.mark.parametrize("workers, optimizer", [(2, "adam"), (4, "default")])
def test_weights_after_steps_equal_one_keras_process_on_the_global_batch(tmp_path, workers,
                                                                        optimizer):
    found = _run(tmp_path, workers, optimizer)
    count = len([k for k in found[0] if k.startswith("arr_")]) // 2
    initial = [found[0][f"arr_{i}"] for i in range(count)]
    for other in found[1:]:  # the strategy broadcast worker 0's initial values
        for i in range(count):
            np.testing.assert_array_equal(other[f"arr_{i}"], initial[i])
    reference, losses = _keras_reference(initial, STEPS, workers, optimizer)
    for worker in found:
        assert int(worker["workers"]) == workers
        for i in range(count):
            np.testing.assert_allclose(worker[f"arr_{count + i}"], reference[i], rtol=1e-4,
                                       atol=1e-6)
    # each worker's loss is its own batch's; their mean is the global batch's loss
    mean_losses = np.mean([w["losses"] for w in found], axis=0)
    np.testing.assert_allclose(mean_losses, losses, rtol=1e-4)


def test_fit_gives_keras_epoch_logs_with_validation_the_same_on_every_worker(tmp_path):
    command = [sys.executable, str(HERE / "collective_ranks.py"), str(tmp_path), "0", str(BATCH),
               "default", "fit"]
    run_workers(command, 2, timeout=300, env={"CUDA_VISIBLE_DEVICES": "-1"})
    found = [json.loads((tmp_path / f"fit{k}.json").read_text()) for k in range(2)]
    for worker in found:
        assert worker["epochs_seen"] == [0, 1, 2]
        assert set(worker["history"]) == {"loss", "val_loss", "val_accuracy"}
        assert all(len(v) == 3 for v in worker["history"].values())
        # 3/4 of 4 x 4 batches of BATCH rows train, shared by 2 workers: 6 steps per epoch
        assert worker["steps"] == 3 * 6
    # the epoch loss is a collective mean and the replicas are the same: equal everywhere
    assert found[0]["history"] == found[1]["history"]
    assert found[0]["history"]["loss"][-1] < found[0]["history"]["loss"][0]


def test_a_worker_that_dies_is_a_clear_error_and_no_worker_is_left(tmp_path):
    import psutil

    command = [sys.executable, str(HERE / "collective_ranks.py"), str(tmp_path), "50",
               str(BATCH), "default", "die"]
    with pytest.raises(CollectiveError, match="worker 1 exited with 3"):
        run_workers(command, 3, timeout=300, env={"CUDA_VISIBLE_DEVICES": "-1"})
    left = [p for p in psutil.process_iter(["cmdline"])
            if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert left == []


def test_bad_requests_are_clear_errors(tmp_path):
    command = [sys.executable, str(HERE / "collective_ranks.py"), str(tmp_path), "1",
               str(BATCH), "default", "two_outputs"]
    with pytest.raises(CollectiveError, match="TrainingSetupError: CollectiveTrainer: model .* "
                                              "has 2 outputs") as failed:
        run_workers(command, 1, timeout=120, env={"CUDA_VISIBLE_DEVICES": "-1"})
    # the failing worker's whole output comes with it: where it failed, not only the last line
    assert failed.value.worker == 0 and "Traceback" in failed.value.output
    with pytest.raises(CollectiveError, match="at least one worker"):
        run_workers(command, 0)


def test_the_trainer_takes_a_function_that_builds_the_model():
    from ralp.collective.runtime import CollectiveTrainer
    from ralp.errors import InvalidTypeError

    # refused before any strategy is made: this process's TensorFlow stays untouched
    with pytest.raises(InvalidTypeError, match="function that builds the model"):
        CollectiveTrainer("not a builder")
    with pytest.raises(InvalidArgumentError, match="implementation must be one of"):
        make_strategy("carrier-pigeon")
