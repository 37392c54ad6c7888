"""Stored records read again with the busiest device's CPU as a side of their bound: a
dilated record's CPU side is read against the host's step, and a side only lowers a ratio."""

import pytest

from lab.tools.bound_sides import sides, table, turns
from tests.bench.records_fixtures import record


def _busy(ps_used: float) -> dict:
    return {"budget_cpus": 0.5, "wall_s": 20.0,
            "tasks": {"ps:0": {"used_cpus": ps_used, "budget_use": ps_used / 0.5},
                      "worker:0": {"used_cpus": 0.1, "budget_use": 0.2}}}


def test_a_dilated_records_cpu_side_is_read_in_the_hosts_time():
    # host: 20 steps of 1.0 s in the 20 s window; reference time: dilation 2, steps of 0.5 s
    r = record(mode="ralp-n", workers=1, ps=1, step_time_s=0.5, host_step_time_s=1.0,
               compute_step_time_s=0.2, wire_step_time_s=0.3, bound_step_time_s=0.3,
               bound_ratio=0.5 / 0.3, cpu=_busy(0.45), measured_steps=20, dilation=2.0)
    found = sides(r)
    assert found["side"] == "cpu ps:0" and found["new"] == pytest.approx(1.0 / 0.9)
    assert found["old"] == pytest.approx(0.5 / 0.3)
    idle = sides({**r, "cpu": _busy(0.05)})  # its CPU side is below the wire: unchanged
    assert idle["side"] == "wire" and idle["new"] == idle["old"]
    assert "cpu ps:0" in table([r, r]) and sides({**r, "bound_ratio": None}) is None


def test_a_step_is_read_against_its_busiest_link_used_in_turns():
    # whole-run counters; the window's busiest direction (ps:0 tx) is 0.5 s per step
    links = {"ps:0": {"tx": 200, "rx": 180}, "worker:0": {"tx": 150, "rx": 150}}
    r = {**record(step_time_s=0.95, wire_step_time_s=0.5), "links": links,
         "busiest_direction": "ps:0 tx"}
    ratio, link = turns(r)
    assert link == "ps:0" and ratio == pytest.approx(0.95 / (0.5 * 380 / 200))
    assert "1.00 ps:0" in table([r])
    assert turns({**r, "links": None}) is None
    assert turns({**r, "busiest_direction": "ps:1 tx"}) is None
