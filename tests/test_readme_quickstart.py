"""The README's quick start runs as written, in every mode.

Its code is read from README.md's "Quick start" section (the one fenced Python block there,
not a copy of it) and saved as the user's script, beside what the user brings: a compiled
``my_cnn.keras`` and their ``load_my_data()``. Then it runs as the README says:

- ``python my_script.py``: its ``__main__``, mode "auto" on a local cluster;
- modes "ps" and "ralp" the way that ``__main__`` runs "auto" (a ``LocalCluster(workers=2,
  ps=1)`` and ``run_in_fresh_process(train, mode, cluster.spec)``);
- modes "horovod" and "stanza": every rank of a ``horovodrun`` job calls ``train(mode)``;
- mode "collective": every worker, with its ``TF_CONFIG``, calls ``train("collective")``.

Each run must train (a loss and a ``val_loss`` per epoch) and leave a ``trained.keras`` that
loads compiled. The model and data are tiny: what is tested is the script, not training.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.needs import HOROVOD_MARKS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SECTION = "## Quick start: your own model"
JOB_TIMEOUT_S = 600
SAMPLES, IMAGE, CLASSES = 160, 8, 10

# What the user writes beside the quick start: their data loader.
USER_DATA = '''\
def load_my_data():  # the user's own (the quick start leaves it to them)
    import numpy as np

    data = np.load("my_data.npz")
    return data["x"], data["y"]


'''

# Modes "ps" and "ralp", run as the quick start's __main__ runs "auto".
PS_RUNNER = '''\
import sys

import ralp
from my_script import train

if __name__ == "__main__":
    with ralp.LocalCluster(workers=2, ps=1) as cluster:
        print(ralp.run_in_fresh_process(train, sys.argv[1], cluster.spec))
'''

# Every rank of an allreduce job: train(mode); rank 0 sends the launcher its history and what
# train printed.
RANK_RUNNER = '''\
import contextlib
import io
import json
import os
import sys

from my_script import train
from ralp._messages import emit

printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    history = train(sys.argv[1])
task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
if int(os.environ.get("HOROVOD_RANK", task.get("index", 0))) == 0:
    emit("record", {"history": {key: [float(v) for v in values] for key, values in history.items()},
                    "printed": printed.getvalue()})
'''


def quick_start_code() -> str:
    """The one fenced Python block of README.md's quick start section."""
    text = README.read_text()
    assert SECTION in text, f"README.md has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, f"the quick start has {len(blocks)} Python blocks, expected one"
    return blocks[0]


def test_the_quick_start_is_one_train_function_for_every_mode():
    """Fast: the block parses, defines ``train(mode, cluster=None)``, and its ``__main__``
    runs it on a local cluster (what the slow tests below run)."""
    code = quick_start_code()
    tree = ast.parse(code)
    train = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train")
    assert [a.arg for a in train.args.args] == ["mode", "cluster"]
    assert "LocalCluster(" in code and "run_in_fresh_process(train," in code


@pytest.fixture(scope="module")
def user_files(tmp_path_factory) -> Path:
    """What a user brings: the quick start as their script, their compiled model, their data."""
    import keras

    folder = tmp_path_factory.mktemp("user")
    (folder / "my_script.py").write_text(USER_DATA + quick_start_code())
    (folder / "run_ps_mode.py").write_text(PS_RUNNER)
    (folder / "run_rank.py").write_text(RANK_RUNNER)
    keras.utils.set_random_seed(0)
    inputs = keras.Input((IMAGE, IMAGE, 1))
    x = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(32, activation="relu")(x)
    outputs = keras.layers.Dense(CLASSES, activation="softmax")(x)
    model = keras.Model(inputs, outputs, name="my_cnn")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.save(folder / "my_cnn.keras")
    rng = np.random.default_rng(0)
    np.savez(folder / "my_data.npz", x=rng.random((SAMPLES, IMAGE, IMAGE, 1), dtype="float32"),
             y=rng.integers(0, CLASSES, SAMPLES).astype("int32"))
    return folder


def _folder(user_files: Path, tmp_path: Path) -> Path:
    for path in user_files.iterdir():
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def _run(command: list[str], folder: Path) -> str:
    proc = subprocess.run(command, cwd=folder, capture_output=True, text=True,
                          timeout=JOB_TIMEOUT_S)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc.stdout


def _printed_history(stdout: str) -> dict:
    """The history the script printed last (a dict of lists of numbers)."""
    line = stdout.strip().splitlines()[-1]
    return ast.literal_eval(re.sub(r"np\.float\d+\(([^)]*)\)", r"\1", line))


def _check(history: dict, folder: Path) -> None:
    import keras

    epochs = len(history["loss"])
    assert 1 <= epochs <= 5 and len(history["val_loss"]) == epochs, history
    assert np.all(np.isfinite(history["loss"] + history["val_loss"])), history
    trained = keras.models.load_model(folder / "trained.keras")
    assert trained.compiled and trained.optimizer is not None, "trained.keras loads uncompiled"
    data = np.load(folder / "my_data.npz")
    assert np.isfinite(trained.evaluate(data["x"], data["y"], verbose=0)[0])


@pytest.mark.cluster
def test_auto_runs_as_the_readme_says(user_files, tmp_path):
    folder = _folder(user_files, tmp_path)
    stdout = _run([sys.executable, "my_script.py"], folder)
    _check(_printed_history(stdout), folder)


@pytest.mark.cluster
@pytest.mark.parametrize("mode", ["ps", "ralp"])
def test_parameter_server_modes_run_as_its_main_does(user_files, tmp_path, mode):
    folder = _folder(user_files, tmp_path)
    stdout = _run([sys.executable, "run_ps_mode.py", mode], folder)
    if mode == "ralp":
        assert "layer(s) offloaded" in stdout, stdout[-2000:]
    _check(_printed_history(stdout), folder)


@pytest.mark.parametrize("mode", [pytest.param("horovod", marks=HOROVOD_MARKS),
                                  pytest.param("stanza", marks=HOROVOD_MARKS)])
def test_horovod_modes_run_in_every_rank_of_horovodrun(user_files, tmp_path, mode):
    from ralp.horovod.launch import horovodrun_command, run_and_collect

    folder = _folder(user_files, tmp_path)
    command = horovodrun_command(2, [sys.executable, "run_rank.py", mode])
    record = _in(folder, lambda: run_and_collect(command, None, JOB_TIMEOUT_S))
    if mode == "stanza":  # the plan says what Stanza does: 1 CONV rank, 1 FC rank
        assert "Stanza plan for 'my_cnn': 1 CONV rank(s), 1 FC rank(s)" in record["printed"]
        assert "FC rank 1 <- CONV rank 0" in record["printed"], record["printed"]
        assert "/job:ps" not in record["printed"], record["printed"]
    _check(record["history"], folder)


@pytest.mark.cluster
def test_collective_runs_in_every_worker_with_its_tf_config(user_files, tmp_path):
    from ralp._messages import parse_message
    from ralp.collective.launch import run_workers

    folder = _folder(user_files, tmp_path)
    results = _in(folder, lambda: run_workers([sys.executable, "run_rank.py", "collective"], 2,
                                              timeout=JOB_TIMEOUT_S))
    record = next(m["record"] for line in results[0].output.splitlines()
                  if (m := parse_message(line)) and "record" in m)
    _check(record["history"], folder)


def _in(folder: Path, job):
    """``job()`` run with ``folder`` as the working directory (the launchers start their
    processes there, as a user's shell would)."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        return job()
    finally:
        os.chdir(before)

