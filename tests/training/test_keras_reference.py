"""Every mode against one Keras process (tests/training/reference.py): after 5 updates from the
same initial weights, each synchronous mode's weights equal one Keras process's ``fit`` on the
concatenated global batches, with SGD, SGD with momentum and Adam, to rtol 1e-4; the epoch's
loss and accuracy equal Keras' too. An asynchronous mode with one worker is one Keras process
step by step. A model of two inputs, fed as dicts, lists, tuples and datasets of them, equals
Keras too, with its validation, ``evaluate`` and ``predict``. Gradient clipping (``clipnorm``)
in horovod and collective: the same as one Keras process, which clips the global batch's
gradient."""

import sys
from pathlib import Path

import numpy as np
import pytest

from ralp import LocalCluster, Plan, run_in_fresh_process
from ralp.horovod.launch import horovodrun_command
from ralp.horovod.launch import run_and_collect as run_horovod
from tests.needs import HOROVOD_MARKS
from tests.training import reference

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "training" / "reference.py")
DETERMINISTIC = {"TF_ENABLE_ONEDNN_OPTS": "0", "CUDA_VISIBLE_DEVICES": "-1"}
TWO_PS = Plan.offloading(reference.LAYERS, ["flatten", "fc1", "logits"], 2).override(
    {"fc1": 1, "logits": 0})


def _compare(results: dict, batch_of, features: str = "one") -> None:
    initials = {name: r["initial"] for name, r in results.items()}
    # the reference runs each optimizer from that run's own initial weights, at its batch
    expected = {}
    for name in results:
        expected.update(run_in_fresh_process(reference.keras_reference, {name: initials[name]},
                                             batch_of(results[name]), features,
                                             env=DETERMINISTIC, timeout=300))
    for name, result in results.items():
        assert any(not np.allclose(a, b) for a, b in
                   zip(result["initial"], result["weights"], strict=True)), "nothing trained"
        for ours, theirs in zip(result["weights"], expected[name]["weights"], strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6, err_msg=name)
        for key in ("loss", "accuracy"):
            np.testing.assert_allclose(result["history"][key], expected[name]["history"][key],
                                       rtol=1e-5, err_msg=f"{name} {key}")
        if features == "two":  # validation, evaluate and predict, on the trained weights
            assert set(result["history"]) == set(expected[name]["history"])
            for key in ("val_loss", "val_accuracy"):
                np.testing.assert_allclose(result["history"][key],
                                           expected[name]["history"][key], rtol=1e-4,
                                           err_msg=f"{name} {key}")
            for key, value in expected[name]["evaluate"].items():
                np.testing.assert_allclose(result["evaluate"][key], value, rtol=1e-4,
                                           err_msg=f"{name} evaluate {key}")
            np.testing.assert_allclose(result["predict"], expected[name]["predict"], rtol=1e-4,
                                       atol=1e-5, err_msg=f"{name} predict")


@pytest.mark.cluster
@pytest.mark.parametrize(("mode", "sync", "workers", "ps", "batch", "plan"), [
    ("ps", "bsp", 2, 1, 12, None),
    ("ps", "bsp", 3, 1, 10, None),  # 10 rows over 3 workers: 3, 3 and 4
    ("ralp", "bsp", 2, 1, 12, None),
    ("ralp", "bsp", 2, 2, 12, TWO_PS),  # the tail over two PS tasks
    ("ps", None, 1, 1, 12, None),  # asynchronous, one worker: every update is Keras' step
    ("ralp", None, 1, 1, 12, None),
], ids=["ps-bsp-2", "ps-bsp-3-uneven", "ralp-bsp-1ps", "ralp-bsp-2ps", "ps-async-1",
        "ralp-async-1"])
def test_parameter_server_modes_equal_one_keras_process(mode, sync, workers, ps, batch, plan):
    with LocalCluster(workers=workers, ps=ps, env=DETERMINISTIC) as cluster:
        results = run_in_fresh_process(reference.ps_job, cluster.spec, mode, sync, batch,
                                       plan.to_json() if plan else None, env=DETERMINISTIC,
                                       timeout=600)
    if plan is not None:
        assert all(r["tasks"] == [0, 1] for r in results.values())
    _compare(results, lambda r: batch)


@pytest.mark.cluster
@pytest.mark.parametrize(("mode", "features"), [("ps", "two"), ("ralp", "two"), ("ralp", "ids"),
                                               ("auto", "two")])
def test_a_two_input_model_in_a_parameter_server_mode_equals_one_keras_process(mode, features):
    """Features as a dict of arrays and as a dataset of tuples, validation, evaluate and
    predict; in ralp the second input's branch is on the PS, its raw input crossing (floats,
    or integer ids)."""
    with LocalCluster(workers=2, ps=1, env=DETERMINISTIC) as cluster:
        results = run_in_fresh_process(reference.ps_job, cluster.spec, mode, "bsp", 12, None,
                                       features, env=DETERMINISTIC, timeout=600)
    if mode == "ralp":
        first = "meta_fc" if features == "two" else "embed"
        assert all(first in r["offloaded"] and "conv" not in r["offloaded"]
                   for r in results.values())
    _compare(results, lambda r: 12, features)


def _ranks(tmp_path, mode: str, ranks: int, *extra, optimizers: str | None = None) -> dict:
    command = [sys.executable, SCRIPT, str(tmp_path), mode, *map(str, extra),
               *(("--optimizers", optimizers) if optimizers else ())]
    if mode == "collective":
        from ralp.collective.launch import run_workers

        run_workers(command, ranks, timeout=600, env=DETERMINISTIC)
    else:
        import os

        run_horovod(horovodrun_command(ranks, command), None, 600,
                    {**os.environ, **DETERMINISTIC})
    return reference.read_ranks(tmp_path)


@pytest.mark.parametrize(("mode", "ranks", "extra"), [
    pytest.param("horovod", 2, (), marks=HOROVOD_MARKS),
    ("collective", 2, ()),
    pytest.param("stanza", 3, (1,), marks=HOROVOD_MARKS),  # 2 CONV ranks + 1 FC rank
    pytest.param("stanza", 5, (2,), marks=HOROVOD_MARKS),  # 3 + 2: groups of 2 and 1
], ids=["horovod-2", "collective-2", "stanza-2+1", "stanza-3+2"])
def test_allreduce_modes_equal_one_keras_process(tmp_path, mode, ranks, extra):
    results = _ranks(tmp_path, mode, ranks, *extra)
    _compare(results, lambda r: r["batch"])


@pytest.mark.parametrize(("mode", "ranks", "features"), [
    pytest.param("horovod", 2, "two", marks=HOROVOD_MARKS),
    ("collective", 2, "two"),
    pytest.param("stanza", 3, "two", marks=HOROVOD_MARKS),  # the second input crosses raw
    pytest.param("stanza", 3, "ids", marks=HOROVOD_MARKS),  # as integers, beside floats
], ids=["horovod-2", "collective-2", "stanza-2+1", "stanza-2+1-ids"])
def test_a_two_input_model_in_an_allreduce_mode_equals_one_keras_process(tmp_path, mode, ranks,
                                                                           features):
    results = _ranks(tmp_path, mode, ranks, 1, features)
    _compare(results, lambda r: r["batch"], features)


@pytest.mark.parametrize(("mode", "ranks"), [
    pytest.param("horovod", 2, marks=HOROVOD_MARKS),
    ("collective", 2),
], ids=["horovod-2", "collective-2"])
def test_gradient_clipping_sees_the_summed_gradient_as_one_keras_process(tmp_path, mode, ranks):
    # clipnorm clips the global batch's gradient in one Keras process; clipping each rank's
    # part before the sum (Keras 3's optimizer under MultiWorkerMirroredStrategy) differs
    results = _ranks(tmp_path, mode, ranks, optimizers="clipped")
    _compare(results, lambda r: r["batch"])
