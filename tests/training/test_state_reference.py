"""A user's training state through every mode against one Keras process
(tests/training/state_reference.py): wrap -> fit -> unwrap -> save -> load -> wrap -> fit
carries the weights and every optimizer variable (step count, learning rate set by a
callback or a schedule, moments) to rtol 1e-4; ModelCheckpoint (best whole model, weights by
batches), EarlyStopping(restore_best_weights=True) and BackupAndRestore save, load compiled,
and restore as in Keras; and a user's script (a two-input model mid-training, dict features
from tf.data, ModelCheckpoint, ReduceLROnPlateau, EarlyStopping) comes out as Keras'."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from ralp import LocalCluster, run_in_fresh_process
from ralp.horovod.launch import horovodrun_command
from ralp.horovod.launch import run_and_collect as run_horovod
from tests.needs import HOROVOD_MARKS
from tests.training import state_reference

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "training" / "state_reference.py")
DETERMINISTIC = {"TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": "-1"}


def _same_state(ours: dict, theirs: dict, label: str) -> None:
    for k, (a, b) in enumerate(zip(ours["weights"], theirs["weights"], strict=True)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=f"{label}: weight {k}")
    assert ours["names"] == theirs["names"], label
    for name, a, b in zip(ours["names"], ours["optimizer"], theirs["optimizer"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=f"{label}: {name}")
    assert ours["learning_rate"] == pytest.approx(theirs["learning_rate"], rel=1e-6), label


def _compare(results: dict, batch: int, tmp_path) -> None:
    initials = {scenario: r["initial"] for scenario, r in results.items()}
    expected = run_in_fresh_process(state_reference.keras_reference, initials, batch,
                                    str(tmp_path / "keras"), env=DETERMINISTIC, timeout=600)
    for scenario, ours in results.items():
        theirs = expected[scenario]
        _same_state(ours["final"], theirs["final"], f"{scenario}: final")
        if scenario == "resume:adam":  # the callback's rate, carried out and back in
            assert ours["final"]["learning_rate"] == pytest.approx(0.01 * 0.5 ** 3)
            assert int(ours["final"]["optimizer"][0]) == 3 * state_reference.STEPS
        if "epochs" in ours:
            assert ours["epochs"] == theirs["epochs"], scenario
        if scenario in ("checkpoints", "backup"):
            assert ours["epochs"] == 2, scenario
        if scenario == "user":  # ReduceLROnPlateau's rates, EarlyStopping's best, the file
            assert ours["rates"] == pytest.approx(theirs["rates"], rel=1e-6)
            assert ours["rates"][-1] < ours["rates"][0]  # the callback lowered it
            _same_state(ours["best"], theirs["best"], "user: best.keras")
        if scenario == "checkpoints":
            _same_state(ours["best"], theirs["best"], "best.keras")
            _same_state(ours["by_batch"], theirs["by_batch"], "weights by batches")
            assert ours["best_evaluated"] == pytest.approx(theirs["best_evaluated"], rel=1e-5)


@pytest.mark.cluster
@pytest.mark.parametrize("mode", ["ps", "ralp", "auto"])
def test_parameter_server_modes_carry_state_as_one_keras_process(mode, tmp_path):
    (tmp_path / "keras").mkdir()
    with LocalCluster(workers=2, ps=1, env=DETERMINISTIC) as cluster:
        results = run_in_fresh_process(state_reference.ps_job, cluster.spec, mode, 12,
                                       str(tmp_path), env=DETERMINISTIC, timeout=900)
    _compare(results, 12, tmp_path)


@pytest.mark.parametrize(("mode", "ranks", "extra"), [
    pytest.param("horovod", 2, (), marks=HOROVOD_MARKS),
    ("collective", 2, ()),
    pytest.param("stanza", 3, (1,), marks=HOROVOD_MARKS),  # 2 CONV ranks + 1 FC rank
    pytest.param("stanza", 4, (2,), marks=HOROVOD_MARKS),  # 2 + 2: the tail on two ranks
], ids=["horovod-2", "collective-2", "stanza-2+1", "stanza-2+2"])
def test_allreduce_modes_carry_state_as_one_keras_process(tmp_path, mode, ranks, extra):
    (tmp_path / "keras").mkdir()
    command = [sys.executable, SCRIPT, str(tmp_path), mode, *map(str, extra)]
    if mode == "collective":
        from ralp.collective.launch import run_workers

        run_workers(command, ranks, timeout=900, env=DETERMINISTIC)
    else:
        run_horovod(horovodrun_command(ranks, command), None, 900,
                    {**os.environ, **DETERMINISTIC})
    results, batch = state_reference.read_ranks(str(tmp_path))
    _compare(results, batch, tmp_path)
