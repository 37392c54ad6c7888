"""Mode "collective" on real worker processes (MultiWorkerMirroredStrategy over gRPC on
loopback): Keras' fit, a lost worker, bad requests. (Its weights against one Keras process:
tests/training/test_keras_reference.py.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ralp.collective.launch import run_workers
from ralp.collective.runtime import CollectiveError, make_strategy
from ralp.errors import InvalidArgumentError

pytestmark = pytest.mark.cluster
HERE = Path(__file__).resolve().parent


def test_fit_gives_keras_epoch_logs_with_validation_the_same_on_every_worker(tmp_path):
    command = [sys.executable, str(HERE / "collective_ranks.py"), str(tmp_path), "fit"]
    run_workers(command, 2, timeout=300, env={"CUDA_VISIBLE_DEVICES": "-1"})
    found = [json.loads((tmp_path / f"fit{k}.json").read_text()) for k in range(2)]
    for worker in found:
        assert worker["epochs_seen"] == [0, 1, 2]
        assert set(worker["history"]) == {"loss", "accuracy", "val_loss", "val_accuracy"}
        assert all(len(v) == 3 for v in worker["history"].values())
        # 3/4 of 32 batches of BATCH rows train, two per update: 12 updates per epoch
        assert worker["steps"] == 3 * 12
    # the epoch loss is a collective mean and the replicas are the same: equal everywhere
    assert found[0]["history"] == found[1]["history"]
    assert found[0]["history"]["loss"][-1] < found[0]["history"]["loss"][0]


def test_a_worker_that_dies_is_a_clear_error_and_no_worker_is_left(tmp_path):
    import psutil

    command = [sys.executable, str(HERE / "collective_ranks.py"), str(tmp_path), "die"]
    with pytest.raises(CollectiveError, match="worker 1 exited with 3"):
        run_workers(command, 3, timeout=300, env={"CUDA_VISIBLE_DEVICES": "-1"})
    left = [p for p in psutil.process_iter(["cmdline"])
            if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert left == []


def test_a_collective_past_the_step_timeout_names_the_setting(tmp_path):
    command = [sys.executable, str(HERE / "collective_ranks.py"), str(tmp_path), "stall"]
    with pytest.raises(CollectiveError, match=r"worker 0 .*a collective did not complete "
                       r"within 10 s.*ralp\.Failures\(step_timeout=\.\.\.\)"):
        run_workers(command, 2, timeout=300, env={"CUDA_VISIBLE_DEVICES": "-1"})


def test_bad_requests_are_clear_errors(tmp_path):
    command = [sys.executable, str(HERE / "collective_ranks.py"), str(tmp_path), "two_outputs"]
    with pytest.raises(CollectiveError, match="TrainingSetupError: ralp.wrap: model .* "
                                              "has 2 outputs") as failed:
        run_workers(command, 1, timeout=120, env={"CUDA_VISIBLE_DEVICES": "-1"})
    # the failing worker's whole output comes with it: where it failed, not only the last line
    assert failed.value.worker == 0 and "Traceback" in failed.value.output
    with pytest.raises(CollectiveError, match="at least one worker"):
        run_workers(command, 0)


def test_the_mode_takes_a_model_or_a_function_that_builds_one():
    import ralp
    from ralp.errors import InvalidTypeError

    # refused before any strategy is made: this process's TensorFlow stays untouched
    with pytest.raises(InvalidTypeError, match="a keras.Model or a function that builds one"):
        ralp.wrap("not a builder", mode="collective")
    with pytest.raises(InvalidArgumentError, match="implementation must be one of"):
        make_strategy("carrier-pigeon")
