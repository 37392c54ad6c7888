"""The lab's line of how far the host's pace moved between a setting's rounds."""

import json

import pytest

from lab.tools.pace_spread import main, pace_spread


def _record(model: str, round_index: int, compute: float, **extra) -> dict:
    return {"model": model, "mode": "ps", "devices": 4, "bandwidth": "1gbit", "batch_size": 8,
            "image_size": 75, "round": round_index, "images_per_sec": 10.0,
            "cpu": {"host_pace": {"interpreter": 1.0, "compute": compute}}, **extra}


def test_the_spread_is_each_kinds_largest_deviation_from_its_settings_median():
    records = [_record("alexnet", k, c) for k, c in enumerate((1.0, 1.2, 0.9))]
    records += [_record("vgg11", k, c) for k, c in enumerate((2.0, 2.0))]
    records.append(_record("alexnet", 3, 9.0, error="failed"))  # a failed run: left out
    spread = pace_spread(records)
    assert spread["compute"] == pytest.approx(0.2)  # alexnet: 1.2 against its median 1.0
    assert spread["interpreter"] == 0.0 and "memory" not in spread


def test_the_command_prints_the_line_and_a_clear_error_for_a_missing_file(tmp_path, capsys):
    path = tmp_path / "records.json"
    path.write_text(json.dumps([_record("alexnet", k, c) for k, c in enumerate((1.0, 1.5))]))  # median 1.25
    assert main([str(path)]) == 0
    assert "compute 20%" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
