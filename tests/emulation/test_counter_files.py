"""Counter files: what one process writes in place, another reads whole; gone once removed."""

import os

from ralp.emulation.counter_files import CounterFile, read_counters


def test_a_counter_file_is_read_in_whole_and_gone_once_removed(tmp_path):
    path = str(tmp_path / "counters")
    counters = CounterFile(path, (0.0, 0.0, 0.0))
    counters.write(1.5, 2.5, 3.5)
    assert read_counters(path) == (1.5, 2.5, 3.5)
    counters.close()
    os.unlink(path)
    assert read_counters(path) is None
