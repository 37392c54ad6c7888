"""The collective mode starts its sums while the backward pass runs: in the traced step
(tests/training/reduction_graph.py), one all-reduce per bucket of gradients in backward order
(``den`` in the first), each waiting (through data or TensorFlow's chaining of a replica's
collectives) for no layer the backward pass reaches later, and no second sum by the
optimizer."""

import json
import sys
from pathlib import Path

import pytest

from ralp.collective.launch import run_workers
from tests.training.reduction_graph import waits_too_long

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "training" / "reduction_graph.py")


def test_collective_sums_buckets_in_backward_order_as_the_backward_pass_produces_them(tmp_path):
    run_workers([sys.executable, SCRIPT, str(tmp_path), "collective"], 2, timeout=600)
    seen = json.loads((tmp_path / "rank0.json").read_text())
    found = seen["reductions"]
    assert {r["type"] for r in found.values()} == {"CollectiveReduceV2"}
    buckets = seen["named"]
    # the buckets' all-reduces and nothing else (the optimizer does not sum them again)
    assert sorted(found) == sorted(buckets)
    # fc1's 2.4 MB kernel closes the first (1 MiB) bucket; the convolutions' come after
    assert [found[n]["sums"] for n in buckets] == [["fc1", "logits"], ["conv1", "conv2"]]
    assert waits_too_long(found) == []
    assert found[buckets[0]]["all"] == ["fc1", "logits"]
