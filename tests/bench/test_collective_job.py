"""Bench mode ``collective`` end to end: TensorFlow's own ring allreduce on real worker
processes, its bytes on the links against the byte model, budgets, a lost worker."""

import json
import os
import signal
import subprocess
import sys

import pytest

from ralp.bench.launcher import Launcher
from ralp.bench.records import RECORD_KEYS
from ralp.bench.runner import measure
from ralp.bench.runspec import BenchError, RunSpec
from tests.leftovers import HIERARCHY, groups_left
from tests.needs import needs_netns

TINY = dict(image_size=28, batch_size=8, num_classes=10, steps=4, warmup=1)
pytestmark = pytest.mark.cluster


def _bench(*args, timeout=600) -> tuple[subprocess.Popen, str, str]:
    p = subprocess.Popen([sys.executable, "-m", "ralp.bench", *args, "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = p.communicate(timeout=timeout)
    return p, stdout, stderr


def test_collective_mode_end_to_end_on_loopback(tmp_path):
    out = tmp_path / "r.json"
    p, stdout, stderr = _bench("--backend", "local", "--models", "lenet", "--modes", "ps,collective",
               "--devices", "2", "--image-size", "28", "--batch-size", "8", "--steps", "3",
               "--warmup", "1", "--num-classes", "10", "--out", str(out))
    assert p.returncode == 0, stderr
    ps, coll = json.loads(out.read_text())
    assert tuple(coll)[: len(RECORD_KEYS)] == RECORD_KEYS  # the collective job follows the schema
    assert set(coll["setup"]) == {"rank_start", "place", "warmup"}
    assert (coll["mode"], coll["workers"], coll["ps"], coll["error"]) == ("collective", 2, 0, None)
    assert coll["images_per_sec"] > 0 and coll["measured_steps"] == 6
    # a ring over 2 workers moves the gradients once each way, as plain PS with one PS does
    assert coll["bytes_per_step_predicted"] == pytest.approx(ps["bytes_per_step_predicted"], 0.01)
    assert "collective" in stdout and coll["speedup_vs_ps"] > 0


@needs_netns
def test_collective_mode_on_netns_measures_the_ring_bytes_inside_the_budgets(tmp_path):
    out = tmp_path / "r.json"
    p, stdout, stderr = _bench("--backend", "netns", "--bandwidth", "1gbit", "--models", "lenet", "--modes",
               "collective", "--devices", "3", "--image-size", "28", "--batch-size", "8",
               "--steps", "3", "--warmup", "1", "--num-classes", "10", "--out", str(out))
    assert p.returncode == 0, stderr
    (r,) = json.loads(out.read_text())
    assert r["error"] is None
    assert sorted(r["links"]) == ["worker:0", "worker:1", "worker:2"]
    # every worker link within 10% of the ring's 2 S (W-1)/W each way (gRPC's framing on top)
    per_link = r["bytes_per_step_predicted"] / 2  # each direction
    steps = r["measured_steps"] / r["workers"]
    for link in r["links"].values():
        assert link["tx"] / steps == pytest.approx(per_link, rel=0.10)
        # a ring: out as much as in, but for what is in flight at the window's edges (a
        # worker reads its own link as its step ends, its neighbour may still be sending)
        assert link["tx"] == pytest.approx(link["rx"], rel=0.10)
    assert 1.0 <= r["bytes_ratio"] < 1.10, r["bytes_ratio"]
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"rlp{p.pid}" not in left
    assert groups_left(p.pid) == []
    if HIERARCHY is not None:  # every worker in its device, read from inside its namespace
        cpu = r["cpu"]
        assert set(cpu["tasks"]) == {"worker:0", "worker:1", "worker:2"}
        for k in range(3):
            assert 0 < cpu["tasks"][f"worker:{k}"]["used_cpus"] <= cpu["budget_cpus"] * 1.1


@needs_netns
def test_a_lost_worker_is_an_error_record_and_nothing_is_left():
    run = RunSpec.for_devices("lenet", "collective", 3, **{**TINY, "steps": 2000})
    prefix = f"rlp{os.getpid()}c"
    killed = []

    def on_progress(message) -> None:
        if message == ("phase", "measuring") and not killed:
            pids = subprocess.run(["ip", "netns", "pids", f"{prefix}-w1"], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:  # the worker this run started in that namespace
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))

    record = measure(run, Launcher("netns", bandwidth="1gbit"), on_progress)
    assert killed
    assert record["error"].startswith("worker 1 was killed by SIGKILL"), record["error"]
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix not in left
    assert groups_left(os.getpid()) == []
    assert not any(os.path.exists(f"/proc/{pid}") for pid in killed)  # stopped and reaped


def test_collective_needs_two_workers_and_no_ps():
    with pytest.raises(BenchError, match="at least 2 workers"):
        RunSpec("lenet", "collective", 1, 1, 0)
    with pytest.raises(BenchError, match="no PS task"):
        RunSpec("lenet", "collective", 3, 2, 1)
    with pytest.raises(BenchError, match="PS modes"):
        RunSpec("lenet", "collective", 2, 2, 0, sync="bsp")
    assert RunSpec.for_devices("lenet", "collective", 4).workers == 4
