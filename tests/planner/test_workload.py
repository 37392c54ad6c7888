"""The planner's byte inputs come from the one byte model, per mode and cluster shape."""

import functools
import json
from pathlib import Path

import pytest

from ralp.models import build_model
from ralp.planner.modes import PlannerError, resources
from ralp.planner.workload import Workload
from ralp.profiler.api import profile
from ralp.profiler.bytes_model import mode_traffic

SWEEP = Path(__file__).resolve().parents[1] / "data" / "bench_sweep_1gbit.json"


@functools.cache
def vgg11_like(model: str) -> Workload:
    """A zoo model as the recorded sweep ran it: batch 8, 75 x 75 images."""
    return Workload(profile(build_model(model, 1000, 75), 8))


@pytest.fixture(scope="module")
def vgg11():
    return vgg11_like("vgg11")


def test_ralp_offloads_everything_after_the_candidate_split(vgg11):
    assert vgg11.profile.candidate_split_after == "pool5"
    assert vgg11.offloaded == ("flatten", "fc6", "drop6", "fc7", "drop7", "logits")


def test_ps_links_follow_round_robin_placement(vgg11):
    workers, ps, links = vgg11.links("ps", 4)
    assert (workers, ps) == (2, 2)
    t = mode_traffic(vgg11.table, "ps", 2, 2)
    assert links.ps_tx == tuple(link.tx for link in t.ps_links)
    assert links.total == t.total


@pytest.mark.parametrize(("model", "tolerance"), [
    ("vgg11", 0.01), ("alexnet", 0.01), ("overfeat", 0.01), ("resnet50", 0.06),
    ("inception3", 0.04),
])
@pytest.mark.parametrize("devices", [4, 8])
def test_ps_link_shares_match_the_measured_links(model, tolerance, devices):
    """PSS places every variable round-robin in creation order, Dropout's seed generators
    too (they shift vgg11's fc7 kernel off ps:0). Reference: the link counters of the
    recorded netns runs. (resnet50/inception3 are a few points off; why is not known.)"""
    work = vgg11_like(model)
    _, ps, links = work.links("ps", devices)
    predicted = [tx + rx for tx, rx in zip(links.ps_tx, links.ps_rx, strict=True)]
    record = next(r for r in json.loads(SWEEP.read_text())
                  if (r["model"], r["mode"], r["devices"]) == (model, "ps", devices))
    measured = [record["links"][f"ps:{k}"]["tx"] + record["links"][f"ps:{k}"]["rx"]
                for k in range(ps)]
    for p, m in zip(predicted, measured, strict=True):
        assert p / sum(predicted) == pytest.approx(m / sum(measured), abs=tolerance)


@pytest.mark.parametrize(("mode", "devices"), [("ps", 3), ("horovod", 1), ("ralp-n", 1), ("x", 4)])
def test_impossible_shapes_are_refused(mode, devices):
    with pytest.raises(PlannerError):
        resources(mode, devices)


def test_stanza_links_match_the_byte_model():
    from ralp.profiler.bytes_model import mode_traffic

    work = Workload(profile(build_model("vgg11", 1000, 64), 8))
    links = work.links_on("stanza", 5, 2)
    t = mode_traffic(work.table, "stanza", 5, 2, {n: 0 for n in work.offloaded})
    assert links.total == t.total and links.worker_tx == t.worker_link.tx
    assert links.ps_rx == tuple(link.rx for link in t.ps_links)
    head_ring, tail_ring = links.rings
    assert tail_ring == 2 * work.tail_trainable_bytes * 1 // 2  # 2 FC ranks: S x (2-1)/2 x 2
    assert head_ring + tail_ring < t.total
