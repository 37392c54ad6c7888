"""The figures a run reports, checked against numpy on made-up timings and counters."""

import numpy as np
import pytest

from ralp.bench.measure import control_plane_figures, link_figures, timing
from ralp.bench.ps_job import Barrier
from ralp.bench.records import add_compute_reference, derived_figures
from ralp.profiler.links import LinkBytes


def test_timing_matches_numpy():
    rng = np.random.default_rng(0)
    start, workers, batch = 10.0, 3, 8
    ends = start + np.cumsum(rng.uniform(0.1, 0.3, size=12))
    t = timing(list(ends), start, 12, workers, batch)
    wall = ends[-1] - start
    assert t["images_per_sec"] == pytest.approx(12 * batch / wall)
    assert t["step_time_s"] == pytest.approx(workers * wall / 12)
    bounds = np.concatenate([[start], ends[workers - 1 :: workers]])
    spans = np.diff(bounds)
    assert t["step_time_std_s"] == pytest.approx(np.std(spans, ddof=1))
    assert t["images_per_sec_std"] == pytest.approx(np.std(workers * batch / spans, ddof=1))


def test_link_figures_are_deltas_per_step():
    before = {"worker:0": LinkBytes(100, 200), "worker:1": LinkBytes(0, 0),
              "ps:0": LinkBytes(50, 50), "chief:0": LinkBytes(1, 1)}
    after = {"worker:0": LinkBytes(1100, 5200), "worker:1": LinkBytes(1000, 5000),
             "ps:0": LinkBytes(2050, 10050), "chief:0": LinkBytes(11, 21)}
    f = link_figures(before, after, steps=4)
    assert f["bytes_per_step_measured"] == (6000 + 6000) / 4
    assert f["ps_bytes_per_step_measured"] == 12000 / 4
    assert f["busiest_link"] == "ps:0"
    assert f["busiest_link_bytes"] == 2000 + 10000
    assert f["busiest_link_one_way_bytes"] == 10000
    assert link_figures(None, None, 4)["bytes_per_step_measured"] is None


def test_derived_figures_and_bound_ratio():
    record = {"model": "m", "mode": "ralp-n", "devices": 4, "workers": 3, "ps": 1,
              "batch_size": 8, "image_size": 32, "num_classes": 10, "steps": 10, "measured_steps": 30,
              "bytes_per_step_measured": 1.05e6, "bytes_per_step_predicted": 1.0e6,
              "busiest_link_bytes": 12.5e6, "step_time_s": 2.0, "error": None}
    d = derived_figures(record, bits_per_s=100e6)
    assert d["bytes_ratio"] == pytest.approx(1.05)
    # 12.5 MB at 100 Mbit/s = 1 s for 30 steps of 3 workers: 0.1 s per worker step
    assert d["network_step_time_s"] == pytest.approx(0.1)
    record.update(d)
    ref = {**record, "step_time_s": 0.5}
    # the reference is matched on the workload: model, mode, sizes, data, sync settings,
    # how the workers pull (another pull schedule is another run), the devices' CPU budget
    # and the round of a repeated matrix
    fields = ("model", "mode", "devices", "workers", "ps", "batch_size", "image_size",
              "num_classes", "data", "sync", "slow_worker", "pull_schedule", "device_cpus",
              "round")
    key = tuple(ref.get(k) for k in fields)
    for other in ({"pull_schedule": "ibatch"}, {"device_cpus": "shared"}, {"round": 1}):
        add_compute_reference([record], {tuple({**ref, **other}.get(k) for k in fields): ref})
        assert "compute_step_time_s" not in record
    add_compute_reference([record], {key: ref})
    assert record["compute_step_time_s"] == 0.5
    assert record["bound_ratio"] == pytest.approx(2.0 / 0.5)


def test_barrier(tmp_path):
    b = Barrier(str(tmp_path), 3)
    b.arrive("ready")
    assert (tmp_path / "ready-3").exists()
    assert not b.passed("go")
    with pytest.raises(TimeoutError):
        b.wait("go", timeout=0.1)
    (tmp_path / "go").touch()
    b.wait("go", timeout=1)


def test_control_plane_rate_is_each_link_kinds_mean_over_the_window():
    before = {"worker:0": LinkBytes(100, 200), "worker:1": LinkBytes(0, 0),
              "ps:0": LinkBytes(5, 5)}
    after = {"worker:0": LinkBytes(1100, 1200), "worker:1": LinkBytes(3000, 1000),
             "ps:0": LinkBytes(805, 1205)}
    rates = control_plane_figures(before, after, 2.0)
    # both directions of each link, per second, averaged over the links of a kind
    assert rates["control_bytes_per_s"] == pytest.approx(np.mean([2000 / 2, 4000 / 2]))
    assert rates["ps_control_bytes_per_s"] == pytest.approx(2000 / 2)
    no_ps = control_plane_figures({"worker:0": LinkBytes(0, 0)}, {"worker:0": LinkBytes(4, 4)}, 1)
    assert no_ps == {"control_bytes_per_s": 8.0, "ps_control_bytes_per_s": None}
