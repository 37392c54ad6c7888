"""The sync experiment: its figures, and a tiny run end to end (JSON, table, plot)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.studies.digits_data import time_to
from lab.studies.result_schemas import SYNC_RESULT_KEYS, make_sync_result
from lab.studies.sync_digits import plot_title, table
from ralp.bench.records import RecordError

ROOT = Path(__file__).resolve().parents[2]  # lab/ is importable from the root
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_the_sync_schema_has_no_key_twice_and_refuses_figures_it_does_not_know():
    assert len(set(SYNC_RESULT_KEYS)) == len(SYNC_RESULT_KEYS)
    with pytest.raises(RecordError, match="wall"):
        make_sync_result("bsp", {}, {"wall": 1.0})


def test_time_to_target_is_the_first_snapshot_reaching_it():
    curve = [{"time_s": 0.0, "accuracy": 0.1}, {"time_s": 2.0, "accuracy": 0.85},
             {"time_s": 4.0, "accuracy": 0.92}, {"time_s": 6.0, "accuracy": 0.89}]
    assert time_to(curve, 0.9) == 4.0
    assert time_to(curve, 0.8) == 2.0
    assert time_to(curve, 0.95) is None


def test_table_shows_each_paradigm_and_errors():
    ok = {"sync": "ssp:3", "iterations_per_s": 12.5, "curve": [{"time_s": 3.0, "accuracy": 0.93}],
          "final_accuracy": 0.93, "wall_s": 9.0, "total_waiting_s": 1.25, "max_gap": 3,
          "steps_per_worker": [10, 20]}
    text = table([ok, {"sync": "bsp", "error": "worker lost"}], [0.9])
    assert "ssp:3" in text and "12.5" in text and "3.0" in text and "10 20" in text
    assert "error: worker lost" in text


def _run(sync, seed, times, gap):
    curve = [{"time_s": t, "accuracy": a} for t, a in times]
    return {"sync": sync, "seed": seed, "iterations_per_s": 10.0 + seed, "curve": curve,
            "final_accuracy": curve[-1]["accuracy"], "wall_s": 5.0, "total_waiting_s": 1.0,
            "max_gap": gap, "steps_per_worker": [5, 5]}


def test_medians_over_seeds_and_targets_a_paradigm_never_reached():
    from lab.studies.digits_data import median_time_to

    runs = [_run("asp", 0, [(1.0, 0.5), (2.0, 0.91), (3.0, 0.96)], 7),
            _run("asp", 1, [(1.0, 0.5), (4.0, 0.92)], 9),
            _run("asp", 2, [(1.0, 0.95)], 4)]
    assert median_time_to(runs, 0.9) == 2.0  # 1, 2, 4
    assert median_time_to(runs, 0.95) == 3.0  # 1, 3, never: the median is reached
    assert median_time_to(runs[1:2], 0.95) is None
    assert median_time_to(runs[:2], 0.95) is None  # 3 and never: the median is never
    text = table(runs, [0.9, 0.95])
    assert "t to 90% (s)" in text and "t to 95% (s)" in text
    row = next(line for line in text.splitlines() if line.startswith("asp"))
    assert row.split()[1:5] == ["3", "11.0", "2.0", "3.0"]  # seeds, median it/s, two targets
    assert " 9 " in row  # the largest gap of any seed
    assert "medians over seeds" in text


def test_the_plot_title_comes_from_the_saved_results():
    run = {"sync": "asp", "steps_per_worker": [48, 157, 155], "slow_worker": "0:+0.4"}
    assert plot_title([{"sync": "bsp", "error": "x"}, run]) == (
        "lenet on digits, 3 workers, worker 0 +0.4 s per step"
    )
    assert plot_title([{**run, "slow_worker": "1:2"}]).endswith("worker 1 2x slower")
    assert plot_title([{**run, "slow_worker": None}]).endswith("no slow worker")


@pytest.mark.cluster
def test_a_tiny_experiment_end_to_end(tmp_path):
    out, png = tmp_path / "sync.json", tmp_path / "sync.png"
    p = subprocess.run([sys.executable, "-m", "lab.studies.sync_digits", "--syncs", "bsp",
                        "dssp-paper:1:3", "--workers", "2", "--slow-worker", "1:2", "--steps", "16",
                        "--backend", "local", "--eval-every", "0.5", "--out", str(out),
                        "--plot", str(png)], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    results = json.loads(out.read_text())["results"]
    assert [r["sync"] for r in results] == ["bsp", "dssp-paper:1:3"]
    assert all(tuple(r) == SYNC_RESULT_KEYS for r in results)  # the records module's schema
    for r in results:
        assert r.get("error") is None
        assert sum(r["steps_per_worker"]) == 16 and r["iterations_per_s"] > 0
        assert r["curve"][0]["steps"] == 0 and r["curve"][-1]["steps"] == 16
        assert all(0 <= point["accuracy"] <= 1 for point in r["curve"])
    assert results[0]["max_gap"] == 0
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert "dssp-paper:1:3" in p.stdout
    assert all(r["slow_delay_s"] > 0 for r in results)


def test_bad_paradigm_is_refused_before_any_cluster():
    p = subprocess.run([sys.executable, "-m", "lab.studies.sync_digits", "--syncs", "ssp",
                        "--backend", "local"], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert p.returncode == 2 and "ssp needs its bound" in p.stderr
