"""The figures a run reports, checked against numpy on made-up timings and counters."""

import numpy as np
import pytest

from ralp.bench.measure import control_plane_figures, link_figures, timing, wire_figures
from ralp.bench.ps_job import Barrier
from ralp.bench.records import derived_figures
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
    q1, q3 = np.percentile(spans, [25, 75])
    assert t["step_time_iqr_s"] == pytest.approx([q1, q3])
    assert t["images_per_sec_iqr"] == pytest.approx([workers * batch / q3, workers * batch / q1])


def test_the_spread_of_a_rate_stays_inside_its_windows_range():
    """A short window (two workers ending at nearly one instant) makes a huge rate: the
    spread shown beside the rate stays inside the windows' rates and narrower than the figure
    itself, where a standard deviation of the rates grew past it."""
    start, workers, batch = 0.0, 2, 8
    ends = list(np.arange(1, 17) * 0.5)
    ends[4:6] = [2.0 + 1e-7, 2.0 + 2e-7]  # the third window is 2e-7 s long
    t = timing(ends, start, len(ends), workers, batch)
    rates = [workers * batch / s for s in np.diff([start, *ends[workers - 1::workers]])]
    assert max(rates) > 1e6 * t["images_per_sec"]
    low, high = t["images_per_sec_iqr"]
    assert min(rates) <= low <= high <= max(rates)
    assert high - low < t["images_per_sec"]


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


def test_the_wire_time_is_the_busiest_direction_over_the_window_per_step():
    before = {"worker:0": LinkBytes(0, 0), "ps:0": LinkBytes(100, 100)}
    after = {"worker:0": LinkBytes(3e6, 1e6), "ps:0": LinkBytes(1_000_100, 5_000_100)}
    w = wire_figures(before, after)
    assert w == {"busiest_direction": "ps:0 rx", "busiest_direction_bytes": 5e6}
    assert wire_figures(None, after)["busiest_direction_bytes"] is None
    record = {"workers": 2, "measured_steps": 20, "busiest_direction_bytes": 5e6,
              "bytes_per_step_measured": 1.05e6, "bytes_per_step_predicted": 1.0e6}
    d = derived_figures(record, bits_per_s=100e6)
    assert d["bytes_ratio"] == pytest.approx(1.05)
    # 5 MB at 100 Mbit/s = 0.4 s for 20 batches of 2 workers: 0.04 s per step of both
    assert d["wire_step_time_s"] == pytest.approx(0.04)
    assert derived_figures(record, None)["wire_step_time_s"] is None


@pytest.mark.parametrize("workers", [1, 3, 7])
def test_the_wire_time_never_exceeds_the_step(workers):
    """Links as full as shaping lets them be, both directions of every link at the rate for
    the whole window: the wire time of a step comes to the step, never more."""
    rng = np.random.default_rng(workers)
    rate, steps = 1e9, 12 * workers
    start = 5.0
    ends = list(start + np.cumsum(rng.uniform(0.05, 0.2, size=steps)))
    wall = ends[-1] - start
    full = int(rate / 8 * wall)  # bytes one direction carries in the window at the rate
    links = ["ps:0", *(f"worker:{k}" for k in range(workers))]
    before = {t: LinkBytes(0, 0) for t in links}
    after = {t: LinkBytes(full, full) for t in links}
    record = {"workers": workers, "measured_steps": steps, "bytes_per_step_measured": None,
              "bytes_per_step_predicted": None, **timing(ends, start, steps, workers, 8),
              **wire_figures(before, after)}
    wire = derived_figures(record, rate)["wire_step_time_s"]
    assert wire <= record["step_time_s"] * (1 + 1e-9)
    assert wire == pytest.approx(record["step_time_s"], rel=1e-6)


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
