"""Plain-text helpers: sizes, counts and durations as people read them."""

import pytest

from ralp._text import human_bytes, human_seconds


@pytest.mark.parametrize("seconds, text", [
    (1.234, "1.23 s"), (61.0, "61 s"), (0.0456, "45.6 ms"), (0.000789, "789 us"),
    (0.0, "0 us"),
])
def test_a_duration_keeps_three_figures_whatever_its_size(seconds, text):
    assert human_seconds(seconds) == text


def test_sizes_step_by_thousands():
    assert human_bytes(999) == "999 B" and human_bytes(1500) == "1.5 KB"
