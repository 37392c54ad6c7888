"""The planner's byte inputs come from the one byte model, per mode and cluster shape."""

import json
from pathlib import Path

import pytest

from ralp.models import build_model
from ralp.planner.modes import PlannerError, resources
from ralp.planner.workload import Workload
from ralp.profiler.api import profile
from ralp.profiler.bytes_model import mode_traffic

SWEEP = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "bench_sweep_1gbit.json"


@pytest.fixture(scope="module")
def vgg11():
    return Workload(profile(build_model("vgg11", 1000, 75), 8))


def test_ralp_offloads_everything_after_the_candidate_split(vgg11):
    assert vgg11.profile.candidate_split_after == "pool5"
    assert vgg11.offloaded == ("flatten", "fc6", "drop6", "fc7", "drop7", "logits")


def test_ps_links_follow_round_robin_placement(vgg11):
    workers, ps, links = vgg11.links("ps", 4)
    assert (workers, ps) == (2, 2)
    t = mode_traffic(vgg11.table, "ps", 2, 2)
    assert links.ps_tx == tuple(link.tx for link in t.ps_links)
    assert links.total == t.total


@pytest.mark.parametrize("devices", [4, 8])
def test_ps_link_shares_match_the_measured_links(vgg11, devices):
    """PSS places every variable round-robin, Dropout's seed generators too: they shift fc7's
    kernel off ps:0. Reference: the link counters of the recorded netns run."""
    _, ps, links = vgg11.links("ps", devices)
    predicted = [tx + rx for tx, rx in zip(links.ps_tx, links.ps_rx, strict=True)]
    record = next(r for r in json.loads(SWEEP.read_text())
                  if (r["model"], r["mode"], r["devices"]) == ("vgg11", "ps", devices))  # fmt: skip
    measured = [record["links"][f"ps:{k}"]["tx"] + record["links"][f"ps:{k}"]["rx"]
                for k in range(ps)]  # fmt: skip
    for p, m in zip(predicted, measured, strict=True):
        assert p / sum(predicted) == pytest.approx(m / sum(measured), abs=0.01)


def test_ralp_and_horovod_links(vgg11):
    workers, ps, ralp = vgg11.links("ralp-n", 4)
    assert (workers, ps) == (3, 1)
    t = mode_traffic(vgg11.table, "ralp", 3, 1, dict.fromkeys(vgg11.offloaded, 0))
    assert ralp.ps_rx == (t.ps_links[0].rx,) and ralp.total == t.total
    workers, ps, hvd = vgg11.links("horovod", 4)
    assert (workers, ps) == (4, 0) and hvd.ps_tx == ()
    assert hvd.worker_tx == 2 * vgg11.table.trainable_param_bytes_total * 3 // 4


@pytest.mark.parametrize(("mode", "devices"), [("ps", 3), ("horovod", 1), ("ralp-n", 1), ("x", 4)])
def test_impossible_shapes_are_refused(mode, devices):
    with pytest.raises(PlannerError):
        resources(mode, devices)
