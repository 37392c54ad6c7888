"""The PS trainer on a real local cluster: equivalence, convergence, checkpoints, failures.

Every scenario's coordinator runs in a fresh process (ParameterServerStrategy binds a process
to one cluster); the tasks are real `python -m ralp.server` processes.
"""

import json
import threading
import time

import numpy as np
import pytest

import ralp
from ralp import (
    ClusterSpec,
    LocalCluster,
    Plan,
    run_in_fresh_process,
    wrap,
)
from ralp.cluster.fresh_process import ChildError
from tests import cluster_jobs as jobs

pytestmark = pytest.mark.cluster
DETERMINISTIC = {"TF_ENABLE_ONEDNN_OPTS": "0"}  # same kernels in every process


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_ralp_plain_ps_and_single_process_give_the_same_losses(optimizer):
    steps = 20
    reference = run_in_fresh_process(
        jobs.local_losses, optimizer, steps, env=DETERMINISTIC, timeout=300
    )
    results = {}
    for mode in ("ralp", "ps"):
        with LocalCluster(workers=1, ps=1, env=DETERMINISTIC) as cluster:
            results[mode] = run_in_fresh_process(jobs.cluster_losses, cluster.spec, mode, optimizer,
                                                 steps, env=DETERMINISTIC, timeout=300)
    assert len(reference) == steps
    np.testing.assert_allclose(results["ps"], reference, rtol=1e-4)
    np.testing.assert_allclose(results["ralp"], reference, rtol=1e-4)


@pytest.mark.parametrize("name, compiled", [("ConvNeXtTiny", True), ("VGG16", False)])
def test_keras_applications_train_placed_like_a_single_process_keras_loop(name, compiled):
    """Real-world models (keras.ops nodes, grouped convs, nested Sequentials, softmax
    outputs), RALP-placed on a one-worker cluster, give a single-process loop's losses: the
    compiled ConvNeXt with its own set-up, VGG16 with the default loss on probabilities.
    (MobileNetV2 was tried: equal at step 1, 3e-6 apart at step 2, 2.4e-4 at step 3; its
    batch norms see 8 samples at 1x1 by the last blocks. Not investigated further.)"""
    steps = 3
    reference = run_in_fresh_process(jobs.application_local_losses, name, steps,
                                     env=DETERMINISTIC, timeout=300)
    with LocalCluster(workers=1, ps=1, env=DETERMINISTIC) as cluster:
        out = run_in_fresh_process(jobs.application_cluster_losses, cluster.spec, name, steps,
                                   compiled, env=DETERMINISTIC, timeout=300)
    assert out["mode"] == "ralp" and out["offloaded"], out
    np.testing.assert_allclose(out["losses"], reference, rtol=1e-4)
    if compiled:  # the compiled metrics are reported
        assert set(out["history"]) == {"loss", "accuracy"}


def test_two_workers_converge_on_real_data_like_plain_ps():
    accuracy = {}
    for mode in ("ralp", "ps"):
        with LocalCluster(workers=2, ps=1) as cluster:
            result = run_in_fresh_process(jobs.digits_accuracy, cluster.spec, mode, 15, timeout=600)
        assert result["mode"] == mode
        accuracy[mode] = result["accuracy"]
    assert accuracy["ps"] > 0.9, accuracy
    assert abs(accuracy["ralp"] - accuracy["ps"]) <= 0.02, accuracy


def test_variables_and_slots_live_where_the_plan_says_on_two_ps():
    with LocalCluster(workers=1, ps=2) as cluster:
        plan = Plan.offloading(("images", "conv1", "pool1", "conv2", "flatten", "fc1", "drop1", "logits"),
                               ["flatten", "fc1", "drop1", "logits"], 2).override({"fc1": 1, "logits": 0})
        out = run_in_fresh_process(jobs.placement, cluster.spec, plan.to_json(), timeout=300)
    ps = lambda k: f"/job:ps/replica:0/task:{k}/device:CPU:0"  # noqa: E731
    by_layer = {}
    for layer, device in out["layer_vars"].values():
        by_layer.setdefault(layer, set()).add(device)
    assert by_layer["fc1"] == {ps(1)} and by_layer["logits"] == {ps(0)}
    assert by_layer["conv1"] | by_layer["conv2"] == {ps(0), ps(1)}  # kept: round-robin over both
    # Adam's slots (m and v of kernel and bias: 4 per layer) sit with their variable.
    slots = out["slots_by_layer"]
    assert slots["fc1"] == [ps(1)] * 4 and slots["logits"] == [ps(0)] * 4
    assert len(slots["conv1"]) == len(slots["conv2"]) == 4  # the head's slots exist too
    by_name = {layer: [d for p, d in out["slots"].items() if f"/{layer}_" in p]
               for layer in ("fc1", "logits")}
    assert by_name == {"fc1": [ps(1)] * 4, "logits": [ps(0)] * 4}, out["slots"]
    assert out["unwrap_keeps_weights"]
    assert out["unwrapped_type"] == "Functional"


def test_checkpoint_round_trip_covers_every_variable(tmp_path):
    with LocalCluster(workers=1, ps=2) as cluster:
        out = run_in_fresh_process(
            jobs.checkpoint_round_trip, cluster.spec, str(tmp_path), timeout=300
        )
    assert out["mismatched"] == []
    assert any("fc1" in p for p in out["changed"]) and any("conv1" in p for p in out["changed"])
    assert any("momentum" in p or "velocity" in p for p in out["changed"])  # optimizer state too
    assert len({d for d in out["devices"].values()}) == 2


def test_nothing_to_offload_trains_plain_ps_with_a_warning():
    with LocalCluster(workers=1, ps=1) as cluster:
        out = run_in_fresh_process(jobs.nothing_to_offload, cluster.spec, timeout=300)
    assert out["mode"] == "ps" and out["plan_empty"]
    assert any("plain PS" in w for w in out["warnings"]), out["warnings"]
    assert "nothing to offload" in out["note"]
    assert len(out["losses"]) == 3


def test_plan_naming_a_missing_layer_is_refused():
    plan = Plan.offloading(("images", "conv1", "fc9"), ["fc9"], 1, model_name="other")
    with (
        LocalCluster(workers=1, ps=1) as cluster,
        pytest.raises(ChildError, match="does not have: \\['fc9'\\]"),
    ):
        run_in_fresh_process(jobs.wrap_with_plan, cluster.spec, plan.to_json(), timeout=300)


def test_subclassed_model_is_refused_before_connecting():
    import keras

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.fc = keras.layers.Dense(3)

        def call(self, x):
            return self.fc(x)

    spec = ClusterSpec("127.0.0.1:1", ("127.0.0.1:2",), ("127.0.0.1:3",))
    for mode in ("auto", "ralp"):  # auto profiles it first, ralp plans it first
        with pytest.raises(ralp.RalpError, match="subclassed"):
            wrap(Net(), spec, mode=mode)


def test_several_outputs_are_refused_before_connecting():
    import keras

    x = inp = keras.Input((4,))
    model = keras.Model(inp, [keras.layers.Dense(2)(x), keras.layers.Dense(3)(x)])
    spec = ClusterSpec("127.0.0.1:1", ("127.0.0.1:2",), ("127.0.0.1:3",))
    with pytest.raises(ValueError, match="2 outputs"):
        wrap(model, spec)


def test_dead_cluster_is_a_clear_error_within_bounded_time():
    from ralp.cluster.spec import local_spec

    spec = local_spec(workers=1, ps=1)  # free ports: nobody is listening
    start = time.monotonic()
    with pytest.raises(ChildError, match="cluster unreachable after 2 s: worker:0 at .*ps:0 at"):
        run_in_fresh_process(_wrap_small, spec, timeout=120)
    assert time.monotonic() - start < 60


def _wrap_small(spec):
    import ralp

    ralp.wrap(jobs.small_cnn(), spec, failures=ralp.Failures(connect_timeout=2))


def test_losing_the_only_worker_stops_training_with_a_clear_error():
    with LocalCluster(workers=1, ps=1) as cluster:
        killer = threading.Timer(25.0, cluster.kill_task, args=("worker", 0))
        killer.start()
        start = time.monotonic()
        try:
            with pytest.raises(ChildError, match="every worker was lost during training: worker:0"):
                run_in_fresh_process(jobs.train_long, cluster.spec, 200_000, timeout=300)
        finally:
            killer.cancel()
        assert time.monotonic() - start < 120
        assert cluster.alive()["ps:0"]  # the variables on the PS survive
    json.dumps({})


def test_sequential_model_callbacks_and_the_ps_lock():
    with LocalCluster(workers=1, ps=1) as cluster:
        out = run_in_fresh_process(jobs.sequential_with_callback, cluster.spec, timeout=300)
    assert out["mode"] == "ralp" and out["offloaded"] == ["flatten", "fc1", "logits"]
    assert out["tail_devices"] == ["/job:ps/replica:0/task:0/device:CPU:0"]
    assert out["events"] == ["train_begin", "epoch_end 0 ['accuracy', 'loss']",
                             "epoch_end 1 ['accuracy', 'loss']", "train_end"]
    assert out["epochs"] == 2
    # consistency: one PS critical section per step, released only after every tail update
    assert out["locks"] == 1
    assert len(out["updates"]) >= 4  # Adam: kernels, biases and their slots
    assert out["updates_after_release"] == []


@pytest.mark.cluster
@pytest.mark.parametrize("mode", ["ralp", "ps"])
def test_fit_takes_validation_and_keras_callbacks_as_keras_does(mode, tmp_path):
    import csv

    with LocalCluster(workers=2, ps=1) as cluster:
        out = run_in_fresh_process(jobs.fit_like_keras, cluster.spec, str(tmp_path), mode,
                                   timeout=600)
    history = out["history"]
    # EarlyStopping saw val_loss not improve by 10 and stopped after epoch 1 (patience 1)
    assert out["stopped_epoch"] == 1 and len(history["loss"]) == 2
    assert set(history) >= {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert len(history["val_loss"]) == 2 and all(v > 0 for v in history["val_loss"])
    # Keras' batch logs: the epoch's running loss and metrics, every step
    assert out["batches_logged"] == 6
    assert all(set(logs) == {"loss", "accuracy"} for logs in out["batch_logs"])
    with open(tmp_path / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["0", "1"]
    assert float(rows[1]["val_loss"]) == pytest.approx(history["val_loss"][1], rel=1e-5)
    assert out["checkpoint_matches"]  # ModelCheckpoint saved the trained weights
    assert out["evaluated"]["loss"] == pytest.approx(history["val_loss"][-1], rel=1e-4)
    # validation_split, validation_freq=2 and initial_epoch=1: epochs 1 and 2, validated after 2
    split = out["split_history"]
    assert len(split["loss"]) == 2 and len(split["val_loss"]) == 1
