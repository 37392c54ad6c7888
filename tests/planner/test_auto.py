"""Mode auto: the planner's choice is the mode its predictions rank first, checked against the
per-mode step-time functions called directly; the choice says why; bad requests fail clearly.
No cluster is started here (a ClusterSpec is only addresses); tests/planner/test_auto_cluster.py
trains with the choice."""

from dataclasses import replace

import pytest

from ralp.cluster.spec import ClusterSpec
from ralp.models import build_model
from ralp.placement.choose import choose_plan
from ralp.planner.auto import choose_for_cluster
from ralp.planner.calibration import Calibration, Entry
from ralp.planner.cluster_plan import task_layout
from ralp.planner.topology import ps_family_step_s
from ralp.planner.workload import Workload
from ralp.profiler.api import profile
from ralp.units import parse_bandwidth

BATCH, IMAGE, CLASSES = 8, 32, 1000
# Two workers and a PS, each a machine of its own (no shared host). The addresses are RFC 5737's
# documentation range: nothing here connects, and nothing could.
_HOSTS = [f"192.0.2.{k}:2222" for k in range(1, 5)]
REMOTE = ClusterSpec(_HOSTS[0], tuple(_HOSTS[1:3]), (_HOSTS[3],))


def _calibration(full_s: float, tail_s: float) -> Calibration:
    return Calibration([Entry("vgg11", BATCH, IMAGE, CLASSES, "pool5", full_s,
                                           tail_s, 3)], "test host")


def _direct(model, cal: Calibration, bits: int) -> dict[str, float]:
    """images/s of plain PS and RALP on REMOTE (a machine per task), from the core's step
    formula itself (ralp.planner.topology)."""
    work = Workload(profile(model, BATCH))
    compute = cal.entries[0].compute
    out = {}
    for mode, planned in (("ps", "ps"), ("ralp", "ralp-n")):
        layout, topo = task_layout(work, planned, 2, 1, compute)
        step = ps_family_step_s(compute, layout, replace(topo, nic_bits=bits), "async")
        out[mode] = 2 * BATCH / step
    return out


@pytest.mark.parametrize(
    ("bandwidth", "full_s", "tail_s", "expected"),
    [
        ("100mbit", 0.1, 0.02, "ralp"),  # vgg11's FC weights dominate a slow link: RALP
        ("100gbit", 0.1, 0.09, "ps"),  # a fast link and a heavy tail serialised on the PS: PS
    ],
)
def test_auto_picks_what_the_predictions_rank_first(bandwidth, full_s, tail_s, expected):
    model = build_model("vgg11", CLASSES, IMAGE)
    cal = _calibration(full_s, tail_s)
    choice = choose_for_cluster(model, REMOTE, bandwidth, cal, batch_size=BATCH)
    direct = _direct(model, cal, parse_bandwidth(bandwidth))
    assert max(direct, key=direct.get) == choice.mode == expected
    assert choice.predicted_images_per_sec == pytest.approx(direct, rel=1e-9)
    assert choice.devices == 3 and choice.bandwidth == bandwidth
    # The choice says why: the chosen mode, every candidate's figure, the calibration.
    why = choice.why
    assert why.startswith(f"auto chose {expected}:")
    for mode, value in direct.items():
        assert f"{mode} {value:.1f}" in why
    assert "(calibration: given, test host)" in why
    record = choice.to_dict()
    assert record["chosen"] == expected and record["why"] == why
    assert set(record["predicted_images_per_sec"]) == {"ps", "ralp"}


def test_a_calibration_lacking_the_model_is_completed_here_and_says_so():
    model = build_model("lenet", 10, 28)
    cal = _calibration(0.1, 0.02)  # vgg11 only
    choice = choose_for_cluster(model, REMOTE, "1gbit", cal, batch_size=4)
    assert "+ lenet measured here" in choice.calibration
    assert model.name == "lenet" and choice.mode in ("ps", "ralp")


def test_the_placement_layer_refuses_auto_and_names_the_planner():
    model = build_model("lenet", 10, 28)
    with pytest.raises(ValueError, match="call ralp.wrap"):
        choose_plan(model, "auto", workers=2, num_ps=1, batch_size=4)
