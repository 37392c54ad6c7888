"""The chaos benchmark: kills, records, the table, and short chaos runs of the lockstep
modes (restarted whole from their checkpoints). (Its full runs are recorded in
benchmarks/results/chaos*.json; the PS modes' recovery is tested in
tests/ps_strategy/test_failures.py.)"""

import json

import pytest

from lab.studies.chaos import Kill, run, table
from lab.studies.result_schemas import CHAOS_RESULT_KEYS, make_chaos_result
from ralp._cli import UsageError
from ralp.bench.records import RecordError
from tests.needs import HOROVOD_MARKS, NETNS_MARKS


def test_kills_parse_and_bad_ones_say_how_to_write_them():
    assert Kill.parse("worker:1@100") == Kill("worker", 1, 100)
    assert str(Kill.parse("ps:0@200")) == "ps:0@200"
    assert Kill.parse("fc:0@100") == Kill("fc", 0, 100)
    for bad in ("worker1@100", "worker:1", "chief:0@5", "ps:0@0", "ps:x@3", "rank:-1@3"):
        with pytest.raises(UsageError, match="--kill"):
            Kill.parse(bad)


@pytest.mark.parametrize("argv, message", [
    (["--kill", "worker:5@10"], "there are only 3 workers"),
    (["--kill", "ps:1@10"], "one PS, ps:0"),
    (["--kill", "ps:0@400"], "the run has only 300 steps"),
    (["--modes", "bogus"], r"unknown mode\(s\) \['bogus'\]"),
    (["--modes", "collective", "--kill", "worker:1@10"], "mode collective has ranks"),
    (["--modes", "collective", "--kill", "rank:3@10"], "has 3 such rank"),
    (["--modes", "collective", "--kill", "fc:0@10"], "only Stanza has CONV and FC ranks"),
    (["--modes", "ps", "--kill", "rank:1@10"], "mode ps has workers and a PS"),
])
def test_bad_arguments_fail_before_any_cluster_starts(argv, message, capsys):
    assert run(argv) == 2
    import re

    assert re.search(message, capsys.readouterr().err)


def test_a_result_has_the_schema_and_the_table_reads_it():
    where = {"workers": 3, "steps_requested": 300}
    result = make_chaos_result("ralp", where, {"steps_completed": 300, "steps_redone": 7,
                                               "accuracy": 0.95, "accuracy_failure_free": 0.951,
                                               "wall_s": 80.0, "wall_s_failure_free": 60.0,
                                               "time_lost_s": 12.5, "left_running": []})
    assert list(result) == list(CHAOS_RESULT_KEYS)
    assert result["mode"] == "ralp" and result["error"] is None
    assert "300/300" in table([result]) and "nothing" in table([result])
    with pytest.raises(RecordError, match="not in the chaos result schema: \\['speed'\\]"):
        make_chaos_result("ps", where, {"speed": 1})


def test_repeats_average_the_accuracies_and_keep_the_worst_counts():
    import argparse

    from lab.studies import chaos

    def run(accuracy, done, redone, left=()):
        return {"mode": "ralp", "accuracy": accuracy, "steps_completed": done,
                "steps_redone": redone, "wall_s": 10.0, "time_lost_s": 2.0,
                "left_running": list(left)}

    pairs = iter([
        {"failure_free": run(0.98, 300, 0), "chaos": run(0.97, 300, 25)},
        {"failure_free": run(0.96, 300, 0), "chaos": run(0.99, 299, 31, ["pid 7"])},
    ])
    figures = chaos.run_mode(lambda *a: next(pairs), "ralp", argparse.Namespace(repeats=2), [])
    assert figures["accuracy"] == pytest.approx(0.98)
    assert figures["accuracy_failure_free"] == pytest.approx(0.97)
    assert (figures["steps_completed"], figures["steps_redone"]) == (299, 31)
    assert figures["left_running"] == ["pid 7"] and len(figures["runs"]) == 2




@pytest.mark.slow
@pytest.mark.parametrize("mode, kills, backend", [
    ("collective", ["rank:1@25"], "local"),
    pytest.param("collective", ["rank:0@25"], "netns", marks=NETNS_MARKS),
    pytest.param("stanza", ["fc:0@15", "conv:1@30"], "local", marks=HOROVOD_MARKS),
])
def test_a_lockstep_job_survives_its_killed_ranks_by_restarting(tmp_path, mode, kills, backend):
    out = tmp_path / "chaos.json"
    argv = ["--modes", mode, "--steps", "40", "--checkpoint-every", "10", "--backend", backend,
            "--kill", *kills, "--out", str(out)]
    assert run(argv) == 0
    (result,) = json.loads(out.read_text())["results"]
    assert result["error"] is None and result["steps_completed"] == 40
    assert result["restarts"] == len(kills) and len(result["failures"]) == len(kills)
    for failure, kill in zip(result["failures"], result["kills"], strict=True):
        assert failure["task"] == f"rank:{kill['rank']}"
        assert failure["at_step"] >= kill["asked_at_step"]
        # at most a checkpoint interval, and the steps done before the kill landed
        assert failure["steps_redone"] == failure["at_step"] - failure["restored_step"] <= 10 + 5
    # lockstep training is deterministic: the restarted job ends where the undisturbed one does
    assert result["accuracy"] == pytest.approx(result["accuracy_failure_free"], abs=0.01)
    assert result["left_running"] == []  # processes, and on netns the run's namespaces
