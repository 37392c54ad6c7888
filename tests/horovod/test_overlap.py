"""Horovod and Stanza start each gradient's sum when the backward pass produces it: in the
traced step (tests/training/reduction_graph.py), one allreduce per gradient, each waiting only for the
backward pass of its own layer and the layers after it, and ``den``'s sum for none."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ralp.horovod.launch import horovodrun_command, run_and_collect
from tests.needs import needs_horovod
from tests.training.reduction_graph import waits_too_long

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "training" / "reduction_graph.py")


def _separate_sums(found: dict, named: list[str], den: str | None) -> None:
    """One allreduce per gradient as ralp names them (and ``den``'s, waiting for no backward
    op), none grouped, none waiting for a layer the backward pass reaches later."""
    assert {r["type"] for r in found.values()} == {"HorovodAllreduce"}, found
    assert sorted(found) == sorted([*named, *([den] if den else [])])
    if den:
        assert found[den]["all"] == []
    for name in named:
        assert set(found[name]["sums"]) <= set(found[name]["data"]), (name, found[name])
    assert waits_too_long(found) == []


@needs_horovod
def test_horovod_sums_each_gradient_as_the_backward_pass_produces_it(tmp_path):
    # one rank: the traced step is every rank's
    subprocess.run([sys.executable, SCRIPT, str(tmp_path), "horovod"], check=True, timeout=300,
                   capture_output=True)
    seen = json.loads((tmp_path / "rank0.json").read_text())
    found = seen["reductions"]
    _separate_sums(found, seen["named"], "ralp_den")
    assert len(seen["named"]) == 8  # 4 layers' kernels and biases
    last = [n for n in seen["named"] if found[n]["sums"] == ["logits"]]
    assert last and all(found[n]["all"] == ["logits"] for n in last)  # not the convolutions'


@needs_horovod
@pytest.mark.cluster
def test_both_stanza_rings_sum_each_gradient_as_their_backward_pass_produces_it(tmp_path):
    # 2 CONV ranks (the head: conv1, conv2) and 2 FC ranks (the tail: fc1, logits)
    run_and_collect(horovodrun_command(4, [sys.executable, SCRIPT, str(tmp_path), "stanza",
                                           "2"]), None, 600)
    for rank in range(4):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        fc = seen["role"] == "fc"
        found = seen["reductions"]
        _separate_sums(found, seen["named"], "ralp_stanza_den" if fc else None)
        first, last = ("fc1", "logits") if fc else ("conv1", "conv2")
        assert {layer for n in seen["named"] for layer in found[n]["sums"]} == {first, last}
        assert all(first not in found[n]["all"] for n in seen["named"]
                   if found[n]["sums"] == [last])
