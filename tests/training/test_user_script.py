"""A user's script (tests/training/user_script.py) runs unmodified in every mode: arrays with
one-hot labels and class weights, a tf.data pipeline with sample weights, a dataset function,
Keras' callbacks (TensorBoard included), evaluate, predict, and unwrap -> save -> load -> fit."""

import json
import sys
from pathlib import Path

import pytest

from ralp import LocalCluster, run_in_fresh_process
from ralp.horovod.launch import horovodrun_command
from ralp.horovod.launch import run_and_collect as run_horovod
from tests.needs import HOROVOD_MARKS
from tests.training import user_script

pytestmark = [pytest.mark.slow, pytest.mark.cluster]
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "training" / "user_script.py")
CPU = {"CUDA_VISIBLE_DEVICES": "-1"}


def _run(mode: str, tmp_path) -> dict:
    if mode in ("ps", "ralp", "auto"):
        with LocalCluster(workers=2, ps=1) as cluster:
            return run_in_fresh_process(user_script.train, mode, str(tmp_path), cluster.spec,
                                        timeout=900)
    command = [sys.executable, SCRIPT, str(tmp_path), mode]
    if mode == "collective":
        from ralp.collective.launch import run_workers

        run_workers(command, 2, timeout=900, env=CPU)
    else:
        import os

        run_horovod(horovodrun_command(3, command), None, 900, {**os.environ, **CPU})
    return json.loads((tmp_path / "report.json").read_text())


@pytest.mark.parametrize("mode", [
    "ps", "ralp", "auto", pytest.param("horovod", marks=HOROVOD_MARKS),
    pytest.param("stanza", marks=HOROVOD_MARKS), "collective"])
def test_a_users_script_runs_unmodified_in_every_mode(mode, tmp_path):
    import csv

    report = _run(mode, tmp_path)
    expected_mode = {"auto": ("ps", "ralp")}.get(mode, (mode,))
    assert report["mode"] in expected_mode
    arrays = report["arrays"]
    assert set(arrays) == {"loss", "accuracy", "auc", "val_loss", "val_accuracy", "val_auc"}
    assert all(len(v) == 2 for v in arrays.values())
    # verbose=2: one line per epoch, with Keras' figures
    lines = [line for line in report["printed"].splitlines() if " - loss: " in line]
    assert len(lines) == 2 and all("val_loss" in line for line in lines), report["printed"]
    with open(tmp_path / "log.csv") as f:
        assert [r["epoch"] for r in csv.DictReader(f)] == ["0", "1"]
    tags = report["tensorboard"]
    assert {"epoch_loss", "epoch_accuracy"} <= set(tags["train"]) and "epoch_loss" in tags[
        "validation"]
    assert set(report["pipeline"]) == {"loss", "accuracy", "auc", "val_loss", "val_accuracy",
                                       "val_auc"}
    assert set(report["function"]) == {"loss", "accuracy", "auc"}
    # evaluate and predict are Keras' own, on the trained weights
    assert report["evaluated"] == pytest.approx(report["plain_evaluated"], rel=1e-6)
    assert report["same_prediction"] == 0.0 and report["prediction_shape"] == [24, 4]
    # the unwrapped model's optimizer holds the trained step count, and trains on after loading
    assert report["steps_before"] == report["updates"] > 0
    assert report["steps_after"] == report["steps_before"] + report["batches_per_epoch"]
