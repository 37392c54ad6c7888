"""Stanza's accuracy experiment: its figures and table from known curves, and a tiny real run
(Stanza on Horovod and plain PS on a netns cluster)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.studies.result_schemas import STANZA_RESULT_KEYS, make_stanza_result
from lab.studies.stanza_accuracy import _figures, table
from ralp.bench.records import RecordError
from tests.needs import needs_horovod, needs_netns

ROOT = Path(__file__).resolve().parents[2]  # lab/ is importable from the root
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CURVE = [{"time_s": 0.0, "steps": 0, "accuracy": 0.1}, {"time_s": 4.0, "steps": 40,
         "accuracy": 0.85}, {"time_s": 8.0, "steps": 80, "accuracy": 0.93}]


def _result(mode, workers, scale, accuracy=0.93):
    curve = [{**p, "time_s": p["time_s"] * scale} for p in CURVE]
    curve[-1]["accuracy"] = accuracy
    raw = {"steps": 80, "wall_s": 8.0 * scale, "final_accuracy": accuracy, "curve": curve,
           "link_bytes": {"ps:0": 5_000_000 * scale, "worker:0": 1}}
    where = {"workers": workers, "bandwidth": "25mbit", "seed": 0, "batch_size": 32,
             "learning_rate": 0.05}
    return make_stanza_result(mode, where, _figures(raw, 32, [0.9]))


def test_figures_from_a_curve():
    r = _result("stanza", 2, 1.0)
    assert tuple(r) == STANZA_RESULT_KEYS
    assert r["time_to"] == {"0.9": 8.0} and r["samples_per_s"] == 80 * 32 / 8.0
    assert r["server_link_bytes"] == 5_000_000 and r["final_accuracy"] == 0.93
    never = _figures({**r, "steps": 80, "link_bytes": None,
                      "curve": CURVE[:2], "final_accuracy": 0.85}, 32, [0.9])
    assert never["time_to"] == {"0.9": None} and never["server_link_bytes"] is None
    with pytest.raises(RecordError, match="stanza result schema"):
        make_stanza_result("ps", {"colour": "red"})


def test_table_gives_stanzas_speedup_over_ps_with_as_many_workers():
    results = [_result("ps", 2, 3.0), _result("stanza", 2, 1.0),
               make_stanza_result("ps", {"workers": 4}, error="ClusterError: lost ps:0"),
               _result("stanza", 4, 0.5)]
    lines = table(results, [0.9]).splitlines()
    stanza2 = next(line for line in lines if line.startswith("stanza") and " 2 " in line)
    assert "3.00x" in stanza2 and "8.0" in stanza2
    assert any("error: ClusterError: lost ps:0" in line for line in lines)
    stanza4 = next(line for line in lines if line.startswith("stanza") and " 4 " in line)
    assert "x" not in stanza4.split()[4]  # no PS run to compare with: no speedup


@pytest.mark.cluster
@needs_netns
@needs_horovod
def test_a_tiny_experiment_end_to_end(tmp_path):
    out, png = tmp_path / "stanza.json", tmp_path / "stanza.png"
    p = subprocess.run([sys.executable, "-m", "lab.studies.stanza_accuracy", "--workers", "2",
                        "--bandwidth", "100mbit", "--samples", "320", "--batch-size", "16",
                        "--eval-every", "0.5", "--eval-steps", "4", "--out", str(out),
                        "--plot", str(png)], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [(r["mode"], r["workers"], r["error"]) for r in results] == [
        ("ps", 2, None), ("stanza", 2, None)]
    ps, stanza = results
    assert ps["worker_batches"] == 20 and stanza["worker_batches"] == 20  # 320 samples each
    for r in results:
        assert r["curve"][0]["steps"] == 0 and r["curve"][-1]["steps"] == 20
        assert all(0 <= point["accuracy"] <= 1 for point in r["curve"])
        assert r["server_link_bytes"] > 0
    # every variable through the PS link each step, against activations to the FC rank
    assert ps["server_link_bytes"] > 5 * stanza["server_link_bytes"]
    assert png.read_bytes()[:8] == PNG_MAGIC and "stanza" in p.stdout


def test_lr_scaling_gives_stanza_w_or_sqrt_w_times_the_learning_rate_and_ps_its_own():
    from lab.studies.stanza_accuracy import _parser, learning_rate_for

    assert learning_rate_for("stanza", 4, 0.05, "linear") == pytest.approx(0.2)
    assert learning_rate_for("stanza", 4, 0.05, "sqrt") == pytest.approx(0.1)
    assert learning_rate_for("stanza", 2, 0.05, "sqrt") == pytest.approx(0.05 * 2**0.5)
    assert learning_rate_for("stanza", 4, 0.05, "none") == 0.05
    assert learning_rate_for("ps", 4, 0.05, "linear") == 0.05
    assert learning_rate_for("ps", 4, 0.05, "sqrt") == 0.05
    with pytest.raises(ValueError, match="use one of none, linear, sqrt"):
        learning_rate_for("stanza", 4, 0.05, "cubic")
    # --scale-lr is kept as the linear rule (recorded runs name it)
    assert _parser().parse_args(["--scale-lr"]).lr_scaling == "linear"
    assert _parser().parse_args([]).lr_scaling == "none"
