"""A transfer's cost on this host, measured through two real gRPC servers on loopback."""

import pytest

from ralp.planner.transfer import measure_transfer


@pytest.mark.cluster
def test_bigger_transfers_cost_more_and_the_line_is_non_negative():
    message_s, per_byte, points = measure_transfer(sizes=(4096, 16 * 1024**2), repeats=3)
    assert [size for size, _ in points] == [4096, 16 * 1024**2]
    assert points[1][1] > points[0][1]  # 16 MB take longer than 4 KB
    assert per_byte > 0 and message_s >= 0
    # The line reproduces the big transfer it was fitted on (two points: exactly).
    assert message_s + per_byte * points[1][0] == pytest.approx(points[1][1], rel=0.05)
