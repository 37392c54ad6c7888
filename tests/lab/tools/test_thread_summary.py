"""The A/B runs' thread samples matched to their records in the order they ran."""

import json

import pytest

from lab.tools.thread_summary import runs, table


def _kinds(python, main=1.0):
    return {"main": main, "tf": 2.0, "python": python, "other": 0.0}


SAMPLES = [
    {"t": 0.0, "groups": {"rlp9-d0/w0": _kinds(0.0), "rlp9-d0/w1": _kinds(0.0),
                          "rlp9-d1/probe": _kinds(5.0)}},
    {"t": 1.0, "groups": {"rlp9-d0/w0": _kinds(0.4), "rlp9-d0/w1": _kinds(0.4),
                          "rlp9-d1/probe": _kinds(5.0)}},
    {"t": 2.0, "groups": {"rlp9-d0/w0": _kinds(0.4), "rlp9-d0/w1": _kinds(0.4),
                          "rlp7-d2/w0": _kinds(0.8), "rlp7-d2/w1": _kinds(0.8)}},
]


def _record(model="inception3"):
    return {"model": model, "workers": 2, "steps": 3, "warmup": 1, "measured_steps": 6,
            "cpu": {"wall_s": 3.0, "tasks": {"worker:0": {"used_cpus": 0.5, "budget_use": 1},
                                             "worker:1": {"used_cpus": 0.5, "budget_use": 1}}}}


def test_runs_are_the_devices_groups_in_the_order_they_began():
    found = runs(SAMPLES)
    assert [r["python"] for r in found] == [0.8, 1.6]  # the probe's group is no run
    assert found[0]["tf"] == 4.0


def test_each_run_is_put_beside_its_record(tmp_path):
    prefix = str(tmp_path / "ab")
    for side in ("before", "after"):
        (tmp_path / f"ab_{side}_1.json").write_text(json.dumps([_record()]))
    threads = tmp_path / "threads.json"
    threads.write_text(json.dumps({"samples": SAMPLES}))
    text = table(str(threads), prefix, 1)
    before, after = [line.split() for line in text.splitlines()[1:3]]
    assert before[:3] == ["inception3", "before", "1"] and after[1] == "after"
    assert float(before[3]) == pytest.approx(0.5)  # 1 CPU x 3 s over 6 batches
    assert float(before[6]) == pytest.approx(0.1) and float(after[6]) == pytest.approx(0.2)
    threads.write_text(json.dumps({"samples": SAMPLES[:2]}))
    with pytest.raises(SystemExit, match="1 runs sampled, 2 records"):
        table(str(threads), prefix, 1)
