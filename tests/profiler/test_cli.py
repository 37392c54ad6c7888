"""``python -m ralp.profiler``: the JSON contract, the views, and bad input (exit 2, stderr)."""

import csv
import io
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # every test runs the CLI in a fresh interpreter (TensorFlow's import each)

REQUIRED = {
    "model", "params_total", "skewness", "threshold", "eligible", "split_after",
    "offloaded_layers", "layers", "bytes_per_step",
}
ROW_FIELDS = {
    "name", "kind", "params", "output_elements", "output_bytes", "flops", "cumulative_params",
}


def run_cli(*args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "ralp.profiler", *args], capture_output=True, text=True, timeout=240
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_vgg19_json_contract():
    out = json.loads(run_cli("--model", "vgg19", "--format", "json").stdout)
    assert set(out) >= REQUIRED
    assert out["model"] == "vgg19"
    assert out["params_total"] == 143_667_240
    assert out["skewness"] < 0 and out["eligible"] is True and out["threshold"] == -0.5
    assert out["split_after"] == "pool5"
    assert out["offloaded_layers"] == ["flatten", "fc6", "drop6", "fc7", "drop7", "logits"]
    assert set(out["bytes_per_step"]) == {"ps", "horovod", "ralp"}
    assert all(isinstance(v, int) and v > 0 for v in out["bytes_per_step"].values())
    assert out["bytes_per_step"]["ralp"] < out["bytes_per_step"]["ps"]
    assert set(out["layers"][0]) >= ROW_FIELDS
    assert out["layers"][-1]["cumulative_params"] == out["params_total"]
    # plain PS moves 2 x model bytes x W in total (W = 4 by default), plus the layer state
    # PSS also serves: vgg19's two Dropout seed generators (two int64 each)
    assert out["bytes_per_step"]["ps"] == 2 * 4 * (out["param_bytes_total"] + 2 * 16)


def test_options_reach_the_profile():
    out = json.loads(
        run_cli("--model", "vgg11", "--image-size", "32", "--batch-size", "8", "--num-classes",
                "21841", "--threshold", "-4", "--workers", "2", "--ps", "2", "--format", "json").stdout
    )
    assert out["batch_size"] == 8 and out["workers"] == 2 and out["ps"] == 2
    assert out["threshold"] == -4.0
    assert out["layers"][-1]["output_shape"] == [21841]
    assert out["layers"][0]["output_shape"] == [32, 32, 3]
    # vgg11-22K is skewed (S ~ -3.2), but not beyond K = -4: not eligible, nothing offloaded
    assert out["eligible"] is False and out["split_after"] is None and out["offloaded_layers"] == []


def test_table_puts_the_decision_on_top_and_csv_parses():
    text = run_cli("--model", "alexnet", "--image-size", "67").stdout
    head = text.splitlines()[:5]
    assert (
        head[0].startswith('Model "alexnet"')
        and "Skewness S" in head[1]
        and "Split after" in head[2]
    )
    assert "split: rows below run on the PS" in text
    rows = list(csv.DictReader(io.StringIO(run_cli("--model", "lenet", "--format", "csv").stdout)))
    assert [r["name"] for r in rows][:2] == ["images", "conv1"]


def test_saved_keras_model(tmp_path):
    import keras

    x = inp = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, name="c")(x)
    x = keras.layers.Flatten(name="f")(x)
    x = keras.layers.Dense(64, name="fc1")(x)
    x = keras.layers.Dense(10, name="fc2")(x)
    path = tmp_path / "m.keras"
    keras.Model(inp, x, name="mine").save(path)
    out = json.loads(run_cli("--keras-model", str(path), "--format", "json").stdout)
    assert out["model"] == "mine" and out["batch_size"] == 32
    assert [r["name"] for r in out["layers"]][1:] == ["c", "f", "fc1", "fc2"]


def test_all_models_summary():
    text = run_cli("--all", "--image-size", "75").stdout
    for name in ("alexnet", "googlenet", "inception3", "lenet", "overfeat", "resnet50", "vgg11",
                 "vgg16", "vgg19"):
        assert f"\n{name} " in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "vgg99"], "unknown model 'vgg99'"),
        (["--model", "vgg11", "--batch-size", "-4"], "positive integer"),
        (["--model", "vgg11", "--workers", "0"], "positive integer"),
        (["--model", "vgg11", "--image-size", "8"], "minimum is 32"),
        (["--keras-model", "/no/such/file.keras"], "no such file"),
        (["--model", "vgg11", "--format", "xml"], "invalid choice"),
        ([], "one of the arguments"),
    ],
)
def test_bad_input_exits_2_with_a_message(args, message):
    proc = run_cli(*args, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert proc.stdout == ""


def test_unreadable_model_file(tmp_path):
    bad = tmp_path / "bad.keras"
    bad.write_text("not a model")
    proc = run_cli("--keras-model", str(bad), check=False)
    assert proc.returncode == 2 and "could not load" in proc.stderr
    assert "oneDNN" not in proc.stderr  # start-up banners are filtered
