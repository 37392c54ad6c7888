"""``python -m ralp.planner``: a plan from the core, a calibration of a saved model, and bad
input (exit 2, no traceback). The simulated cluster's options live in the lab's planner."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ralp.planner.calibration import Calibration, Entry
from ralp.planner.cli import run

pytestmark = pytest.mark.slow  # the CLI in a fresh interpreter (TensorFlow's import each)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def calibration(tmp_path):
    path = tmp_path / "cal.json"
    entries = [Entry("alexnet", 8, 75, 1000, "pool5", 0.05, 0.01, 5)]
    Calibration(entries, "test").save(path)
    return path


def test_devices_are_planned_by_the_core_from_the_calibration(calibration, capsys):
    assert run(["--model", "alexnet", "--batch-size", "8", "--image-size", "75",
                "--devices", "3", "4", "--bandwidth", "1gbit", "10gbit",
                "--compute-profile", str(calibration), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    modes = {(p["devices"], p["mode"]) for p in out["predictions"]}
    # the PS tasks run on the machines' CPUs: plain PS on any N
    assert {(n, m) for n in (3, 4) for m in ("ps", "ralp-h", "ralp-n")} <= modes
    assert all(p["gpus_per_node"] == 1 for p in out["predictions"])
    assert len(out["best"]) == 4
    assert out["skewness_verdict"].startswith("eligible")


@pytest.mark.parametrize("argv, message", [
    ([], "say which model"),
    (["--calibrate", "--model", "vgg11"], "needs --output"),
    (["--calibrate", "--output", "/tmp/never-written.json"], "or --keras-model PATH"),
    (["--calibrate", "--keras-model", "/nonexistent/m.keras", "--output", "/tmp/x.json"],
     "no such file"),
    (["--model", "nope"], "unknown model"),
    # the simulated cluster's validation and probes are the lab's, not the user's
    (["--validate", "records.json"], "unrecognized arguments: --validate"),
    (["--model", "vgg11", "--shared-host"], "unrecognized arguments: --shared-host"),
])
def test_bad_input_exits_2_without_a_traceback(argv, message):
    done = subprocess.run([sys.executable, "-m", "ralp.planner", *argv], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_calibrate_a_saved_keras_model_writes_its_entry(tmp_path, capsys):
    from ralp.models import build_model

    path = tmp_path / "mine.keras"
    model = build_model("lenet", 10, 28)
    model.save(path)
    out = tmp_path / "cal.json"
    assert run(["--calibrate", "--keras-model", str(path), "--batch-size", "4", "--steps", "2",
                "--output", str(out)]) == 0
    assert f"{model.name} batch 4 image 28" in capsys.readouterr().out
    entry = Calibration.load(out).find(model.name, 4, 28, 10)
    assert entry.full_s > entry.tail_s > 0
