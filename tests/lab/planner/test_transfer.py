"""A transfer's cost on this host, measured through two real gRPC servers on loopback."""

import pytest

from lab.planner.transfer import measure_message_cpu, measure_transfer


@pytest.mark.cluster
def test_bigger_transfers_cost_more_and_the_line_is_non_negative():
    small, big = 4096, 16 * 1024**2
    message_s, per_byte, points = measure_transfer(sizes=(small, big), repeats=3)
    assert [size for size, _, _ in points] == [small, big]
    (_, wall_small, cpu_small), (_, wall_big, cpu_big) = points
    assert wall_big > wall_small and cpu_big > cpu_small  # 16 MB cost more than 4 KB
    assert per_byte > 0 and message_s >= 0
    # The CPU line goes through the two points it was fitted on.
    assert per_byte == pytest.approx((cpu_big - cpu_small) / (big - small), rel=1e-6)
    # The fixed cost is the small transfer's wall time less its bytes' share of the wall line.
    wall_slope = (wall_big - wall_small) / (big - small)
    assert message_s == pytest.approx(max(0.0, wall_small - wall_slope * small), rel=1e-6)


@pytest.mark.cluster
def test_the_same_bytes_in_many_variables_cost_more_cpu_than_in_one():
    per_transfer, points = measure_message_cpu(counts=(1, 128), repeats=5)
    (one, cpu_one), (many, cpu_many) = points
    assert (one, many) == (1, 128)
    assert cpu_many > cpu_one  # 256 transfers of 16 KB against 2 of 2 MB
    # the line through the two points, per transfer (a pull and a push per variable)
    assert per_transfer == pytest.approx((cpu_many - cpu_one) / (2 * 128 - 2), rel=1e-6)
    assert 1e-6 < per_transfer < 5e-3  # microseconds to milliseconds, not seconds
