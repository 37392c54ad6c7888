"""gRPC's CPU per byte on the simulated fabric: the probe's shape and arithmetic, and one real
probe between two budgeted devices whose bytes the link counters confirm."""

import pytest

from lab.planner.fabric_transfer import (
    MAX_STEP_BYTES,
    MIN_STEP_BYTES,
    VARIABLES,
    _figures,
    measure_fabric_transfer,
    step_bytes_at,
)
from ralp.emulation.budget import budget_for
from ralp.emulation.cpu_meter import find_hierarchy
from ralp.errors import RalpError
from tests.needs import needs_netns

HIERARCHY, _ = find_hierarchy()


def test_a_probe_step_takes_about_a_second_on_the_wire_within_bounds():
    size = step_bytes_at(10**9)  # 125 MB/s: a pull and a push of 62.5 MB take a second
    assert size == pytest.approx(62.5e6, rel=1e-3) and size % (4 * VARIABLES) == 0
    assert step_bytes_at(10**6) == MIN_STEP_BYTES
    assert step_bytes_at(10**11) == MAX_STEP_BYTES


def test_both_ends_per_byte_add_and_a_silent_link_is_refused():
    record = {"step_s": 1.0, "cpu_s": {"ps:0": 0.2, "worker:0": 0.3},
              "bytes": {"ps:0": 100_000_000, "worker:0": 100_000_000},
              "throttled": {"ps:0": 0.1, "worker:0": 0.2}}
    figures = _figures(record, 10**9, 50_000_000)
    assert figures.ps_cpu_s_per_byte == pytest.approx(2e-9)
    assert figures.worker_cpu_s_per_byte == pytest.approx(3e-9)
    assert figures.cpu_s_per_byte == pytest.approx(5e-9)
    assert figures.throttled == (0.1, 0.2)
    record["bytes"]["ps:0"] = 0
    with pytest.raises(RalpError, match="no bytes"):
        _figures(record, 10**9, 50_000_000)


def test_shared_cpus_have_no_device_to_measure_on():
    with pytest.raises(RalpError, match="budgeted devices"):
        measure_fabric_transfer(budget_for("shared", 4), 10**9)


@pytest.mark.cluster
@needs_netns
@pytest.mark.skipif(HIERARCHY is None, reason="no writable cgroup cpu controller here")
def test_two_budgeted_tasks_move_the_probe_s_bytes_at_the_link_s_pace():
    rate = 500 * 10**6
    measured = measure_fabric_transfer(budget_for("auto", 4), rate, steps=2)
    size = step_bytes_at(rate)
    # a step pulls the bytes and pushes them back (a variable's push beside the next one's
    # pull): the link's rate bounds each direction
    assert measured.step_s >= 0.9 * size / (rate / 8)
    # each end did CPU work for its bytes, and the figure is each end's per byte summed
    assert measured.ps_cpu_s_per_byte > 0 and measured.worker_cpu_s_per_byte > 0
    assert measured.cpu_s_per_byte == pytest.approx(
        measured.ps_cpu_s_per_byte + measured.worker_cpu_s_per_byte)
    # a budgeted device of 0.425 CPU cannot have spent more than its budget on them
    assert measured.ps_cpu_s_per_byte * 2 * size <= 0.425 * measured.step_s * 1.1
