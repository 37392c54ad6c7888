"""The bench on a user's own saved model (``--keras-model FILE``): its input side and
classes come from the file, what contradicts them is refused, and a run measures it."""

import json
import subprocess
import sys

import pytest

from ralp.bench.config import BenchRequest
from ralp.bench.runspec import BenchError
from ralp.models import build_model
from tests.model_files import save_small_cnn


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    # one channel: the bench's images follow the model
    return save_small_cnn(tmp_path_factory.mktemp("model"), "mine", (24, 24, 1), 7, 8, 64)


def test_the_files_input_side_and_classes_make_the_workload(model_file):
    request = BenchRequest(models=(model_file,))
    work = request.workload(model_file)
    assert (work["image_size"], work["num_classes"]) == (24, 7)
    (run,) = request.runs(["ps"])
    assert (run.model, run.image_size, run.num_classes) == (model_file, 24, 7)
    from ralp.bench.ps_job import dataset_fn_for

    images, labels = next(iter(dataset_fn_for(run)()))
    assert images.shape == (run.batch_size, 24, 24, 1)
    model = build_model(model_file, 7, 24)
    assert model.name == "mine"


@pytest.mark.parametrize("given", [{"num_classes": 10}, {"image_size": 32},
                                   {"data": "digits"}])
def test_what_contradicts_the_file_is_refused(model_file, given):
    with pytest.raises(BenchError, match="classes"):
        BenchRequest(models=(model_file,), **given).workload(model_file)


def test_a_missing_file_is_said(tmp_path):
    missing = str(tmp_path / "nope.keras")
    with pytest.raises(BenchError, match="no such model file"):
        BenchRequest(models=(missing,)).workload(missing)


@pytest.mark.slow
def test_the_bench_measures_a_saved_model(model_file, tmp_path):
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "ralp.bench", "--keras-model", model_file, "--modes", "ps",
         "--devices", "2", "--backend", "local", "--steps", "4", "--warmup", "1",
         "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = json.loads(out.read_text())
    assert record["model"] == model_file and record["images_per_sec"] > 0


def test_a_saved_model_of_two_inputs_gets_every_input(tmp_path):
    """Images for its image input, values of their shape and dtype for the others, by key:
    what fit takes for the model (the bench then measures it in every mode)."""
    import keras
    import tensorflow as tf

    from ralp.bench.ps_job import dataset_fn_for
    from ralp.training.fit_inputs import standard_data

    ids = keras.Input((3,), dtype="int32", name="ids")
    images = keras.Input((12, 12, 2), name="images")
    x = keras.layers.Flatten()(keras.layers.Conv2D(2, 3)(images))
    e = keras.layers.Flatten()(keras.layers.Embedding(5, 2)(ids))
    out = keras.layers.Dense(4)(keras.layers.Concatenate()([x, e]))
    path = str(tmp_path / "pair.keras")
    keras.Model([ids, images], out, name="pair").save(path)
    request = BenchRequest(models=(path,))
    work = request.workload(path)
    assert (work["image_size"], work["num_classes"]) == (12, 4)
    (run,) = request.runs(["ps"])
    dataset = dataset_fn_for(run)(None)
    features, labels = next(iter(dataset))
    assert features["images"].shape == (run.batch_size, 12, 12, 2)
    assert features["ids"].dtype == tf.int32 and features["ids"].shape == (run.batch_size, 3)
    model = build_model(path, 4, 12)
    x, _ = standard_data(dataset.take(1), None, model)
    assert model.predict(x, verbose=0).shape == (run.batch_size, 4)


@pytest.mark.slow
def test_the_bench_measures_a_saved_model_of_two_inputs(tmp_path):
    """Its second input's branch on the PS (ralp-n) and on the FC rank (stanza): records with
    figures, not errors."""
    from tests.placement.test_rewriter import _two_input_model

    path = str(tmp_path / "two.keras")
    _two_input_model(ids=True).save(path)
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "ralp.bench", "--keras-model", path, "--modes", "ralp-n",
         "stanza", "--devices", "2", "--batch-size", "8", "--backend", "local", "--steps", "4",
         "--warmup", "1", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    records = json.loads(out.read_text())
    assert [r["mode"] for r in records] == ["ralp-n", "stanza"]
    for record in records:
        assert record["error"] is None and record["images_per_sec"] > 0
        assert "embed" in record["offloaded_layers"]
