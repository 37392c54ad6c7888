"""The bench's --calibrate with the lab's calibration command (``RALP_BENCH_CALIBRATION``):
each workload's record carries the simulated cluster's probes, and the lab's validation
predicts each record from the calibration taken beside it."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.experiments._common import CALIBRATION
from lab.planner.ring_overlap import OVERLAP_RATIOS
from ralp.horovod.launch import horovod_unavailable_reason
from tests.needs import needs_netns

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.cluster
@needs_netns
def test_calibrate_keeps_one_calibration_per_workload_that_validate_predicts_from(tmp_path):
    out = tmp_path / "calibrated.json"
    p = subprocess.run([sys.executable, "-m", "ralp.bench", "--backend", "netns", "--bandwidth",
                        "1gbit", "--models", "lenet", "--modes", "ps", "ralp-n", "--devices", "2",
                        "--batch-size", "16", "--steps", "3", "--warmup", "1", "--num-classes",
                        "10", "--out", str(out), "--quiet"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env={**os.environ, **CALIBRATION})
    assert p.returncode == 0, p.stderr
    ps, ralp = json.loads(out.read_text())
    assert ps["calibration"] == ralp["calibration"]  # measured once, before the first run
    cal = ps["calibration"]
    [entry] = cal["entries"]
    assert (entry["model"], entry["batch_size"], entry["image_size"], entry["num_classes"]) == (
        "lenet", 16, 28, 10)
    assert entry["full_s"] > entry["tail_s"] > 0 and cal["host"]["cpu_s_per_byte"] > 0
    budget = (ps.get("cpu") or {}).get("budget_cpus")
    if budget:  # measured inside one device's budget: no shared-host terms
        assert cal["host"]["shared"] is False
        assert cal["host"]["device_cpus"] == pytest.approx(budget)
        if horovod_unavailable_reason() is None:  # Gloo's ring overlap, on two such devices
            assert 0.0 <= cal["host"]["ring_overlap"] <= 1.0
            assert cal["host"]["ring_wire_factor"] >= 1.0  # measured with it: no faster than the rate
            # at one wire / CPU ratio by default: a figure, no curve to outrank it
            assert OVERLAP_RATIOS == (1.0,) and cal["host"]["ring_overlaps"] == []
    else:  # no control groups here: the shared host's calibration
        assert cal["host"]["shared"] is True and entry["capacity"] > 0
    assert cal["measured_at"] < time.time() and cal["seconds"] > 0
    done = subprocess.run([sys.executable, "-m", "lab.planner", "--validate", str(out),
                           "--format", "json"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    if budget:  # budgeted records are read as repeats: one setting per mode, its band
        rows = report["settings"]
        # a run the host could not keep up with (a busy CI host) is not a device's: left out
        kept = [r["mode"] for r in (ps, ralp) if r["host_kept_up"] is not False]
        assert [(r["mode"], r["rounds"]) for r in rows] == [(mode, 1) for mode in kept]
        assert report["excluded_flagged"] == 2 - len(kept)
        assert all(r["predicted"] > 0 and r["band"][0] <= r["measured_median"] for r in rows)
    else:
        rows = report["records"]
        assert [(r["mode"], r["own_calibration"]) for r in rows] == [("ps", True), ("ralp-n", True)]
        assert all(r["predicted_images_per_sec"] > 0 for r in rows)
