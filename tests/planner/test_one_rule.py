"""One decision rule answers everywhere: ``ralp.wrap``'s mode auto, the planner's plan (its CLI
and ``ralp.recommend``) and the bench's ``--modes auto`` give the same answer on the same
predictions, and that answer is the documented policy (docs/explanation/cost-model.md)."""

import pytest

from ralp.cluster.spec import ClusterSpec, free_ports
from ralp.models import build_model
from ralp.planner.auto import WRAP_CANDIDATES, TaskLinks, choose, choose_on_tasks
from ralp.planner.cluster_plan import (
    DECISION_MARGIN,
    MIN_BYTES_SAVED,
    ClusterPlan,
    ClusterPrediction,
    decide,
    predict_on_tasks,
)
from ralp.planner.estimate import DeviceRates, estimate_compute
from ralp.planner.workload import Workload
from ralp.profiler.api import profile
from ralp.units import parse_bandwidth

RATES = DeviceRates(conv_flops_per_s=15e9, fc_flops_per_s=15e9, other_flops_per_s=1.5e9,
                    per_layer_s=3e-4)
_PORTS = [f"127.0.0.1:{p}" for p in free_ports(6)]
CLUSTERS = {"2+1": ClusterSpec(_PORTS[0], tuple(_PORTS[1:3]), (_PORTS[3],)),
            "4+1": ClusterSpec(_PORTS[0], tuple(_PORTS[1:5]), (_PORTS[5],))}
NAMES = {planned: mode for mode, planned in WRAP_CANDIDATES.items()}


@pytest.mark.parametrize("model, image", [("alexnet", 67), ("vgg11", 32), ("resnet50", 32),
                                          ("lenet", 28), ("googlenet", 75)])
def test_wrap_the_planner_and_the_bench_give_one_answer(model, image):
    work = Workload(profile(build_model(model, image_size=image, num_classes=100), 8))
    compute = estimate_compute(work.table, work.offloaded, RATES)
    for cluster in CLUSTERS.values():
        workers, ps = len(cluster.workers), len(cluster.ps)
        for bandwidth in ("100mbit", "1gbit", "10gbit"):
            wrap = choose_on_tasks(work, compute, cluster, TaskLinks(bandwidth),
                                   "fixed rates").mode
            candidates = WRAP_CANDIDATES.values() if work.offloaded else ("ps",)
            found = [predict_on_tasks(work, compute, m, workers, ps, parse_bandwidth(bandwidth))
                     for m in candidates]
            assert all(p.bytes_per_image > 0 for p in found)  # the byte condition can apply
            planner = ClusterPlan(model, model, 8, tuple(found), ()).best()[0].mode
            bench = choose(found, bandwidth, "fixed rates", names=NAMES).mode
            assert wrap == NAMES[planner] == bench, (model, cluster, bandwidth)


def _p(mode: str, rate: float, bytes_per_image: float) -> ClusterPrediction:
    return ClusterPrediction(mode, 4, 1, 4, 3, 1, 10**9, rate, 1.0, "", bytes_per_image)


@pytest.mark.parametrize("ralp_rate, ralp_bytes, chosen", [
    (100 * (1 + DECISION_MARGIN) * 0.99, 10.0, "ps"),  # inside the margin: a tie, ps needs less
    (100 * (1 + DECISION_MARGIN) * 1.01, 10.0, "ralp-n"),  # outside it, bytes saved
    (200.0, 100 * (1 - MIN_BYTES_SAVED) * 1.01, "ps"),  # far faster, but saves too few bytes
    (80.0, 10.0, "ps"),  # slower
])
def test_the_rule_is_the_documented_policy(ralp_rate, ralp_bytes, chosen):
    decision = decide([_p("ps", 100.0, 100.0), _p("ralp-n", ralp_rate, ralp_bytes)])
    assert decision.best.mode == chosen


def test_the_cost_model_page_states_the_rule_with_its_figures():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs/explanation/cost-model.md").read_text()
    assert f"*decision margin*, {DECISION_MARGIN:.0%}" in page
    assert f"at least {MIN_BYTES_SAVED:.0%} fewer bytes per image than plain PS" in page
