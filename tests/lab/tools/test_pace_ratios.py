"""The host settings' ratios: each mode over plain PS in its own round, medians over the
rounds, read against the reference setting; the paces and the bench's marks beside them."""

import json

import pytest

from lab.tools.pace_ratios import main, part_records, round_ratios, summary
from tests.bench.records_fixtures import record


def _round(folder, name, k, images, pace=(0.9, 0.92), **marks):
    """One setting's records of round ``k``: a record per mode with its images/s."""
    rows = [record(model="alexnet", mode=mode, images_per_sec=v, device_pace=pace[0],
                   device_pace_after=pace[1], device_cpus="0.25", **marks)
            for mode, v in images.items()]
    (folder / f"{name}_{k}.json").write_text(json.dumps(rows))


def test_each_rounds_modes_are_read_against_that_rounds_plain_ps(tmp_path):
    _round(tmp_path, "quiet", 1, {"ps": 2.0, "ralp-n": 10.0, "horovod": 5.0, "stanza": 12.0})
    _round(tmp_path, "quiet", 2, {"ps": 4.0, "ralp-n": 16.0, "horovod": 12.0, "stanza": 24.0})
    parts = part_records(tmp_path)
    ratios = round_ratios(parts["quiet"])
    assert ratios[("alexnet", "ralp-n")] == pytest.approx([5.0, 4.0])  # not 26 / 6
    assert ratios[("alexnet", "horovod")] == pytest.approx([2.5, 3.0])
    assert {r["round"] for r in parts["quiet"]} == {1, 2}


def test_a_setting_is_read_against_the_reference_and_says_its_marks(tmp_path):
    _round(tmp_path, "quiet", 1, {"ps": 2.0, "ralp-n": 10.0, "horovod": 5.0, "stanza": 12.0})
    _round(tmp_path, "loaded", 1, {"ps": 2.0, "ralp-n": 12.0, "horovod": 5.0, "stanza": 9.0},
           pace=(0.7, 0.5), host_kept_up=False, pace_held=False)
    text = summary(part_records(tmp_path), "quiet")
    loaded = next(line for line in text.splitlines() if line.startswith("loaded | alexnet"))
    assert "6.00x [6.00-6.00] (+20%)" in loaded and "4.50x [4.50-4.50] (-25%)" in loaded
    assert "paces 0.70->0.50; 4 not kept up, 4 pace moved, of 4" in text
    quiet = next(line for line in text.splitlines() if line.startswith("quiet | alexnet"))
    assert "%" not in quiet  # the reference is not read against itself


def test_a_missing_reference_is_a_clear_error(tmp_path, capsys):
    _round(tmp_path, "quiet", 1, {"ps": 2.0, "ralp-n": 10.0})
    with pytest.raises(SystemExit) as e:
        main([str(tmp_path), "--reference", "busy"])
    assert e.value.code == 2 and "no records of 'busy'" in capsys.readouterr().err
