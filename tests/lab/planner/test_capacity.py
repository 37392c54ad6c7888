"""The shared host's capacity: processes forked from the zygote time one window together."""

import pytest

from lab.planner.capacity import measure_host_capacities, measure_host_capacity, run_together


@pytest.mark.cluster
def test_processes_time_the_same_window():
    run = run_together("lenet", 16, 28, 10, processes=2, window_s=1.5)
    assert run.processes == 2 and len(run.steps_per_s) == 2
    assert all(rate > 0 for rate in run.steps_per_s)
    # The barrier releases them together: their timed windows start within a moment.
    assert max(run.started) - min(run.started) < 0.25, run.started
    assert run.total_steps_per_s == pytest.approx(sum(run.steps_per_s))


@pytest.mark.cluster
def test_capacity_is_the_gain_over_one_process():
    capacity = measure_host_capacity("lenet", 16, 28, 10, processes=2, window_s=1.5)
    # Two processes on this host run at least about as fast as one, at most twice (+ noise).
    assert 0.7 < capacity < 2.6


@pytest.mark.cluster
def test_capacities_are_measured_per_process_count_against_one_alone():
    measured = measure_host_capacities("lenet", 16, 28, 10, counts=(3, 2), window_s=1.5)
    assert [n for n, _ in measured] == [2, 3]  # ascending, as Host.capacity_at reads them
    assert all(0.5 < capacity < 3.5 for _, capacity in measured), measured
