"""A model of several outputs: ralp.wrap refuses it, and the profiler's verdict, the planner
(CLI and API) and the bench say so in the same words instead of planning or running it."""

import re

import keras
import pytest

from ralp.profiler.api import profile
from ralp.profiler.trainable import several_outputs

SAID = ("model 'heads' has 2 outputs; ralp's trainers compute one loss on one output. Train a "
        "single-output model, e.g. keras.Model(model.inputs, model.outputs[0])")


def heads():
    images = keras.Input((8, 8, 3), name="images")
    x = keras.layers.Flatten()(keras.layers.Conv2D(4, 3)(images))
    x = keras.layers.Dense(16, name="fc")(x)
    return keras.Model(images, [keras.layers.Dense(3, name="a")(x),
                                keras.layers.Dense(2, name="b")(x)], name="heads")


@pytest.fixture(scope="module")
def heads_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "heads.keras"
    heads().save(path)
    return str(path)


def test_one_output_is_taken():
    images = keras.Input((3,))
    assert several_outputs(keras.Model(images, keras.layers.Dense(2)(images))) is None


def test_wrap_and_the_profilers_verdict_say_the_same():
    from ralp.profiler.render import to_dict
    from ralp.training.compile import TrainingSetupError, training_setup

    with pytest.raises(TrainingSetupError) as refused:
        training_setup(heads(), where="ralp.wrap")
    assert str(refused.value).startswith(f"ralp.wrap: {SAID}")
    p = profile(heads(), 8)
    assert p.verdict.startswith(f"ralp cannot train it: {SAID}")
    assert to_dict(p)["refusal"].startswith(SAID)
    assert profile(heads(), 8).table.rows  # still profiled as it is


def test_the_planner_refuses_to_plan_it_and_writes_no_command(heads_file, tmp_path, capsys):
    from ralp.planner.api import recommend
    from ralp.planner.cli import run
    from ralp.planner.modes import PlannerError

    with pytest.raises(PlannerError, match=re.escape(SAID)):
        recommend(heads(), [2], ["1gbit"])
    assert run(["--keras-model", heads_file, "--nodes", "2", "--bandwidth", "1gbit",
                "--device-throughput", "100", "--save", str(tmp_path / "plan")]) == 2
    err = capsys.readouterr().err
    assert SAID in err and "Traceback" not in err
    assert not (tmp_path / "plan" / "cmd_optimal.txt").exists()


def test_the_bench_refuses_it_before_any_run(heads_file):
    from ralp.bench.config import BenchRequest
    from ralp.bench.runspec import BenchError

    with pytest.raises(BenchError) as refused:
        BenchRequest(models=(heads_file,)).workload(heads_file)
    assert SAID in str(refused.value)
