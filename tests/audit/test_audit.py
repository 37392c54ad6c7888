"""The placement audit on real clusters: a VGG and an AlexNet, RALP vs plain PS, 1 and 2 PS."""

import json
import subprocess
import sys

import pytest

import ralp
from ralp.audit.step_audit import AuditSettings, audit

pytestmark = pytest.mark.cluster

CASES = {  # model, image size (scaled down for CPU), batch
    "vgg11": (32, 8),
    "alexnet": (67, 8),
}


@pytest.mark.parametrize("model", sorted(CASES))
@pytest.mark.parametrize("ps", [1, 2])
def test_ralp_places_every_offloaded_op_and_variable_on_its_ps(model, ps):
    image, batch = CASES[model]
    r = audit(AuditSettings(model, "ralp", workers=2, ps=ps, image_size=image, batch_size=batch))
    assert r["mode"] == "ralp"
    assert r["offloaded_layers"] == ["flatten", "fc6", "drop6", "fc7", "drop7", "logits"]
    assert r["misplaced_ops"] == []
    assert r["offloaded_variable_bytes_crossing"] == 0
    assert r["unknown_size_crossings"] == []
    # the audit's real crossings and the profiler's byte model agree
    assert r["crossing_bytes_per_step"] == pytest.approx(r["model_bytes_per_step"], rel=0.10)
    # offloaded layers' ops run only on PS tasks, and on the planned one
    tasks = {name: place for name, place in ((e["name"], e["place"]) for e in r["plan"]["layers"])}
    for layer in ("fc6", "fc7", "logits"):
        devices = {d for d, n in r["layers"][layer].items() if n}
        assert devices == {f"/job:ps/replica:0/task:{tasks[layer][3:]}/device:CPU:0"}, (
            layer,
            devices,
        )
    if ps == 2:
        assert (
            len({tasks[name] for name in ("fc6", "fc7", "logits")}) == 2
        )  # spread over both tasks


@pytest.mark.parametrize("model", sorted(CASES))
def test_plain_ps_moves_the_same_layers_variables_across(model):
    image, batch = CASES[model]
    r = audit(AuditSettings(model, "ps", workers=2, ps=1, image_size=image, batch_size=batch))
    assert r["mode"] == "ps" and r["offloaded_layers"] == []
    assert "fc6" in r["reference_layers"]
    # every weight of those layers is read and its gradient pushed, once per worker batch; the
    # dropout layers' RNG state (an int64[2] per layer: read twice, written once) crosses too
    table = ralp.profile(ralp.build_model(model, image_size=image), batch).table
    fc_bytes = sum(table.row(name).param_bytes for name in r["reference_layers"])
    rng_state = 2 * 3 * 16  # per worker batch: drop6 and drop7
    assert r["offloaded_variable_bytes_crossing"] == 2 * (2 * fc_bytes + rng_state)
    assert r["crossing_bytes_per_step"] == pytest.approx(r["model_bytes_per_step"], rel=0.10)
    fc6_devices = {d for d, n in r["layers"]["fc6"].items() if n and "worker" in d}
    assert fc6_devices  # plain PS computes the FC layers on the worker


def test_cli_json_contract():
    proc = subprocess.run(
        [sys.executable, "-m", "ralp.audit", "--model", "vgg11", "--image-size", "32", "--batch-size",
         "4", "--workers", "1", "--format", "json"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    for key in ("mode", "offloaded_layers", "misplaced_ops", "offloaded_variable_bytes_crossing",
                "crossing_bytes_per_step", "model_bytes_per_step"):
        assert key in r
    assert (
        r["mode"] == "ralp"
        and r["misplaced_ops"] == []
        and r["offloaded_variable_bytes_crossing"] == 0
    )


@pytest.mark.parametrize(
    "args, message",
    [(["--model", "vgg99"], "unknown model"), (["--model", "alexnet", "--image-size", "32"], "minimum is 67"),
     (["--model", "vgg11", "--workers", "0"], "positive integer")],
)
def test_cli_bad_input(args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "ralp.audit", *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and message in proc.stderr


@pytest.mark.parametrize("mode", ["ralp", "ps"])
def test_the_bsp_step_is_placed_as_the_asynchronous_one(mode):
    """BSP's step (gradients into the round's accumulators on the PS): the offloaded layers'
    ops on their PS task, and the bytes crossing those of the byte model."""
    image, batch = CASES["vgg11"]
    r = audit(AuditSettings("vgg11", mode, workers=2, ps=1, image_size=image, batch_size=batch,
                            sync="bsp"))
    assert r["mode"] == mode and r["sync"] == "bsp"
    assert r["misplaced_ops"] == [] and r["unknown_size_crossings"] == []
    if mode == "ralp":
        assert r["offloaded_variable_bytes_crossing"] == 0
    assert r["crossing_bytes_per_step"] == pytest.approx(r["model_bytes_per_step"], rel=0.10)


@pytest.mark.parametrize(("pulls", "ps"), [("ibatch", 1), ("layer", 1), ("default", 1),
                                           ("ibatch", 2)])
def test_batched_pulls_are_messages_in_the_real_graph(pulls, ps):
    """The worker's variables arrive as one message per pull batch and PS task (packed on the
    PS), not one per variable, and carry exactly the worker's variables."""
    image, batch = CASES["vgg11"]
    r = audit(AuditSettings("vgg11", "ps", workers=2, ps=ps, image_size=image, batch_size=batch,
                            pulls=pulls))
    assert r["pull_bytes"] == r["pull_bytes_model"] > 0
    if pulls == "default":  # ParameterServerStrategy's own: a receive per variable
        assert r["pull_messages"] == r["pulled_variables"] and r["packed_messages"] == 0
    else:
        assert 0 < r["pull_batches"] <= r["pull_messages"] <= r["pull_batches"] * ps
        assert r["packed_messages"] > 0
        if pulls == "ibatch":
            assert r["pull_messages"] < r["pulled_variables"]
