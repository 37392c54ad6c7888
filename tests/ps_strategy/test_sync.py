"""Synchronization paradigms on a real local cluster: BSP against synchronous SGD, the bound
under a slow worker, RALP's tail, bad settings."""

import numpy as np
import pytest

from ralp import LocalCluster, run_in_fresh_process
from ralp.cluster.fresh_process import ChildError
from ralp.ps_strategy.staleness import SyncError
from ralp.ps_strategy.sync import CALIBRATION_STEPS, Slowdown, SlowWorker
from tests import cluster_jobs as jobs

DETERMINISTIC = {"TF_ENABLE_ONEDNN_OPTS": "0"}


def test_the_slow_workers_delay_is_fixed_after_calibration():
    slowdown = Slowdown(factor=3.0)
    assert slowdown.after(5.0) == 0.0  # the first step includes tracing: no delay from it
    typical = [1.0, 1.2, 0.8, 1.0, 1.1][:CALIBRATION_STEPS]
    delays = [slowdown.after(t) for t in typical]
    assert delays[0] == pytest.approx(2.0) and delays[1] == pytest.approx(2.2)
    fixed = 2.0 * float(np.median(typical))
    assert slowdown.fixed_s == pytest.approx(fixed)
    assert delays[-1] == slowdown.last_s == pytest.approx(fixed)
    # later steps, however long (a shared CPU under load), do not change the delay
    assert slowdown.after(10.0) == slowdown.after(0.1) == pytest.approx(fixed)
    assert Slowdown(factor=1.0).after(1.0) == 0.0
    fixed_from_the_start = Slowdown.of(SlowWorker.parse("2:+0.25"))
    assert [fixed_from_the_start.after(t) for t in (5.0, 1.0, 0.1)] == [0.25] * 3


def test_slow_worker_spellings():
    assert SlowWorker.parse("1:2") == SlowWorker(1, factor=2.0)
    assert SlowWorker.parse("0:+0.2") == SlowWorker(0, delay_s=0.2)
    assert str(SlowWorker.parse("0:+0.2")) == "0:+0.2" and str(SlowWorker(3, 1.5)) == "3:1.5"
    for bad in ("1", "a:2", "1:x", "1:0.5", "-1:2", "1:+-0.2", "1:2:3"):
        with pytest.raises(SyncError, match="slow worker"):
            SlowWorker.parse(bad)


@pytest.mark.cluster
@pytest.mark.parametrize("mode", ["ps", "ralp"])
def test_bsp_is_synchronous_sgd_on_the_combined_batch(mode):
    rounds, workers = 3, 2
    with LocalCluster(workers=workers, ps=1, env=DETERMINISTIC) as cluster:
        got = run_in_fresh_process(jobs.bsp_weights, cluster.spec, mode, rounds, workers,
                                   env=DETERMINISTIC, timeout=300)
    assert got["mode"] == mode and got["max_gap"] == 0 and got["clocks"] == [rounds] * workers
    # one update per round, for the head and (RALP) the tail alike
    assert set(got["iterations"].values()) == {rounds}, got["iterations"]
    expected = run_in_fresh_process(jobs.sync_sgd_weights, got["initial"], rounds, workers,
                                    env=DETERMINISTIC, timeout=300)
    assert any(not np.allclose(a, b) for a, b in zip(got["initial"], expected, strict=True))
    for a, b in zip(got["final"], expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def _starts_gaps(record: dict) -> list[int]:
    return [gap for _, _, _, gap in record["starts"]]


@pytest.mark.cluster
@pytest.mark.parametrize(("sync", "bound"), [("bsp", 0), ("ssp:1", 1), ("dssp:1:3", 3)])
def test_the_bound_holds_with_a_3x_slow_worker(sync, bound):
    steps = 18
    with LocalCluster(workers=3, ps=1) as cluster:
        got = run_in_fresh_process(jobs.synced_run, cluster.spec, sync,
                                   steps // 3 if sync == "bsp" else steps, "0:3", timeout=300)
    record = got["record"]
    updates = steps // 3 if sync == "bsp" else steps  # a BSP update is a round of 3 steps
    assert sum(record["clocks"]) == steps == len(got["workers"])
    assert len(got["losses"]) == updates
    assert max(_starts_gaps(record)) <= bound
    assert record["max_gap"] <= bound
    assert record["slow_delay_s"] > 0  # from the slow worker's own step times
    # the slow worker ran fewest steps unless BSP kept everyone in step
    counts = np.bincount(got["workers"], minlength=3)
    assert counts[0] == min(counts)
    if sync != "bsp":
        assert record["total_waiting_s"] > 0  # the fast workers were held back at times


@pytest.mark.cluster
def test_asp_under_the_drivers_lets_fast_workers_run_ahead():
    with LocalCluster(workers=2, ps=1) as cluster:
        got = run_in_fresh_process(jobs.synced_run, cluster.spec, "asp", 16, "0:4",
                                   timeout=300)
    record = got["record"]
    assert record["total_waiting_s"] == 0 and record["holds"] == []
    assert record["max_gap"] >= 2  # nobody held the fast worker back


@pytest.mark.cluster
def test_ssp_with_ralp_never_lets_the_tail_go_stale():
    with LocalCluster(workers=2, ps=1) as cluster:
        got = run_in_fresh_process(jobs.synced_run, cluster.spec, "ssp:1", 12, "1:+0.05",
                                   "ralp", timeout=300)
    assert got["mode"] == "ralp" and got["record"]["slow_delay_s"] == 0.05
    assert got["record"]["max_gap"] <= 1 and sum(got["record"]["clocks"]) == 12
    # The tail is updated on the PS for every batch, in order: never stale (12 updates).
    assert got["iterations"] == {"head": 12, "tail": 12}


@pytest.mark.cluster
@pytest.mark.parametrize(("mode", "sync"), [("ps", "asp"), ("ralp", None), ("ps", None)])
def test_every_update_of_concurrent_workers_is_applied_once(mode, sync):
    """Asynchronous workers: the optimizers' counts and a probe in the model (its own loss:
    each applied update moves it by exactly the rate) both say ``steps``. (Keras counts an
    update with read-then-assign; two workers at once lost 10-30% of the counts before the
    trainer made the counter's add atomic.)"""
    steps = 60
    with LocalCluster(workers=2, ps=1) as cluster:
        got = run_in_fresh_process(jobs.counted_updates, cluster.spec, mode, sync, steps,
                                   timeout=300)
    assert set(got.values()) == {steps}, got


@pytest.mark.cluster
@pytest.mark.parametrize(("workers", "rows", "batch"), [(2, 48, 12), (3, 50, 12)])
def test_one_bsp_epoch_uses_every_sample_exactly_once(workers, rows, batch):
    """Read back from the weights: every sample moved its own weight once, by its batch's
    share (50 rows: a last batch of 2 rows, one of 3 workers running a stand-in)."""
    with LocalCluster(workers=workers, ps=1) as cluster:
        got = run_in_fresh_process(jobs.every_sample_once, cluster.spec, rows, batch,
                                   timeout=300)
    assert got["updates"] == -(-rows // batch)
    sizes = [min(batch, rows - k) for k in range(0, rows, batch)]
    moves = sorted(got["kernel"])
    expected = sorted(2 * jobs.PROBE_RATE / size for size in sizes for _ in range(size))
    np.testing.assert_allclose(moves, expected, rtol=1e-6)


@pytest.mark.cluster
def test_bad_sync_settings_are_refused_with_a_reason():
    with LocalCluster(workers=2, ps=1) as cluster:
        with pytest.raises(ChildError, match="slow worker 5 does not exist"):
            run_in_fresh_process(jobs.synced_run, cluster.spec, "ssp:1", 4, "5:2", timeout=300)
        with pytest.raises(ChildError, match="use bsp, asp, ssp:S, dssp:L:U or dssp-paper:L:U"):
            run_in_fresh_process(jobs.synced_run, cluster.spec, "stale", 4, None, timeout=300)
