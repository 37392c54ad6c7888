"""Link rates and delays written as tc writes them, and read back."""

import pytest

from ralp.units import format_bandwidth, format_latency, parse_bandwidth, parse_latency


@pytest.mark.parametrize(("bits", "text"), [(1e9, "1gbit"), (2.5e8, "250mbit"),
                                            (1e9 / 3, "333.333333mbit"), (1500, "1.5kbit"),
                                            (999, "999bit"), (0.2, "1bit")])
def test_a_rate_is_written_to_the_bit_and_read_back(bits, text):
    assert format_bandwidth(bits) == text
    assert parse_bandwidth(text) == max(1, round(bits))


@pytest.mark.parametrize(("seconds", "text"), [(0.01, "10ms"), (0.0025, "2.5ms"),
                                               (0.00025, "250us"), (1e-9, "1us")])
def test_a_delay_is_written_to_the_microsecond_and_read_back(seconds, text):
    assert format_latency(seconds) == text
    assert parse_latency(text) == pytest.approx(max(seconds, 1e-6))
