"""The planner's byte inputs come from the one byte model, per mode and cluster shape."""

import pytest

from ralp.models import build_model
from ralp.planner.modes import PlannerError, resources
from ralp.planner.workload import Workload
from ralp.profiler.api import profile
from ralp.profiler.bytes_model import mode_traffic


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
    # Round robin over vgg11's variables puts the big fc6 kernel and more on ps:0.
    assert links.ps_tx[0] > links.ps_tx[1]


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
