"""Workload consolidation: scenarios, and two jobs sharing one shaped trunk for real."""

import json
import subprocess
import sys

import pytest

from ralp.bench.consolidate import scenario_runs
from ralp.bench.records import RECORD_KEYS
from ralp.bench.runspec import BenchError
from tests.needs import needs_netns


def _workload(model):
    return {"image_size": 32, "batch_size": 8}


def test_scenarios_assign_modes_and_cycle_models():
    models = ["vgg11", "resnet50"]
    runs = {s: scenario_runs(s, 4, models, 4, _workload) for s in ("all-ps", "all-ralp", "mixed")}
    assert [r.model for r in runs["mixed"]] == ["vgg11", "resnet50", "vgg11", "resnet50"]
    assert [r.mode for r in runs["all-ps"]] == ["ps"] * 4
    assert [r.mode for r in runs["all-ralp"]] == ["ralp-n"] * 4
    assert [r.mode for r in runs["mixed"]] == ["ralp-n", "ralp-n", "ps", "ps"]
    assert [(r.workers, r.ps) for r in runs["mixed"]] == [(3, 1), (3, 1), (2, 2), (2, 2)]
    with pytest.raises(BenchError, match="unknown scenario"):
        scenario_runs("some", 2, models, 4, _workload)


@needs_netns
@pytest.mark.cluster
def test_two_jobs_share_one_trunk_and_each_reports_its_throughput(tmp_path):
    out = tmp_path / "c.json"
    before = _namespaces()
    p = subprocess.run(
        [sys.executable, "-m", "ralp.bench", "--jobs", "2", "--scenarios", "mixed",
         "--models", "lenet", "--num-classes", "10", "--devices", "2", "--bandwidth", "1gbit",
         "--steps", "4", "--warmup", "1", "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=600,
    )
    assert p.returncode == 0, p.stderr
    records = json.loads(out.read_text())
    assert [(r["job"], r["scenario"], r["mode"]) for r in records] == [
        (0, "mixed", "ralp-n"), (1, "mixed", "ps")]
    for r in records:
        assert tuple(r)[: len(RECORD_KEYS)] == RECORD_KEYS  # consolidation follows the schema
        assert r["images_per_sec"] > 0 and r["error"] is None
        assert r["bytes_ratio"] == pytest.approx(1.0, abs=0.10)
    # Every worker <-> PS byte of both jobs crossed the one trunk.
    both = sum(r["bytes_per_step_measured"] * r["measured_steps"] for r in records)
    assert records[0]["trunk_bytes_measured"] >= 0.9 * both
    assert "scenario mixed" in p.stdout
    assert _namespaces() <= before  # the run removed every namespace it made


def _namespaces() -> set[str]:
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listing.splitlines() if line.strip()}
