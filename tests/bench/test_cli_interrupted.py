"""An interrupted bench keeps what it measured: the records of the runs that finished are
printed and written before the interrupt ends the command (ralp.bench.cli._execute)."""

import json
from types import SimpleNamespace

import pytest

import ralp.bench.runner
from ralp.bench import cli
from tests.bench.records_fixtures import record


def test_records_measured_before_ctrl_c_are_written(tmp_path, monkeypatch, capsys):
    finished = record(model="alexnet", mode="ps")

    def one_run_then_ctrl_c(runs, launcher, *, on_record, **_):
        on_record(finished)
        raise KeyboardInterrupt  # during the second run

    monkeypatch.setattr(ralp.bench.runner, "run_all", one_run_then_ctrl_c)
    request = SimpleNamespace(jobs=0, calibrate=False, repeat=1)
    out = tmp_path / "bench.json"
    args = SimpleNamespace(out=str(out), csv=str(tmp_path / "bench.csv"), plot=None, quiet=True)
    with pytest.raises(KeyboardInterrupt):
        cli._execute(request, [object(), object()], object(), args)
    written = json.loads(out.read_text())
    assert [(r["model"], r["mode"]) for r in written] == [("alexnet", "ps")]
    assert "alexnet" in (tmp_path / "bench.csv").read_text()
    assert "alexnet" in capsys.readouterr().out  # the table was printed too
