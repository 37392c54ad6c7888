"""Layouts on a real cluster, the device's compute from its throughput, and the decision
with ties (ralp.planner.cluster_plan)."""

from functools import cache

import pytest

from ralp.models import build_model
from ralp.planner.cluster_plan import (
    DECISION_MARGIN,
    NEEDS,
    ClusterPrediction,
    decide,
    device_compute,
    predict_mode,
    ps_layout,
)
from ralp.planner.modes import PlannerError
from ralp.planner.topology import Topology
from ralp.planner.workload import Workload
from ralp.profiler.api import profile


@cache
def alexnet() -> Workload:
    return Workload(profile(build_model("alexnet", 1000, 75), 8))


def test_compute_from_throughput_splits_head_and_tail_by_flops():
    work = alexnet()
    c = device_compute(work, 100.0)
    assert c.full_s == pytest.approx(8 / 100)
    moved = set(work.offloaded)
    share = (sum(r.flops for r in work.table.rows if r.name in moved)
             / sum(max(0, r.flops) for r in work.table.rows))
    assert c.tail_s == pytest.approx(c.full_s * share)
    assert c.head_s == pytest.approx(c.full_s - c.tail_s)
    with pytest.raises(PlannerError):
        device_compute(work, 0)


def test_ps_layouts_hold_every_variable_once():
    work = alexnet()
    total = sum(v[2] for v in work.table.variables)
    topo = Topology(3, 4, 10e9)
    for balanced in (False, True):
        layout = ps_layout(work, "ps", topo, balanced=balanced)
        assert layout.workers_per_node == (4, 4, 4)
        assert sum(layout.homed) == total
    aggregated = ps_layout(work, "ps", topo, gpus_per_worker=4, ps_tasks=2, balanced=True)
    assert aggregated.workers_per_node == (1, 1, 1) and len(aggregated.homed) == 2
    # largest first onto the least loaded task: no task holds more than the mean plus
    # the largest variable
    assert max(aggregated.homed) <= total / 2 + max(v[2] for v in work.table.variables)


def test_ralp_layouts_give_the_ps_one_gpu_or_half_the_devices_to_workers():
    work = alexnet()
    topo = Topology(2, 4, 10e9)
    n = ps_layout(work, "ralp-n", topo)
    assert n.workers_per_node == (3, 4) and n.boundary_bytes == work.profile.boundary_bytes
    h = ps_layout(work, "ralp-h", topo)
    assert h.workers == 4 and h.workers_per_node == (2, 2)


def test_predictions_count_worker_devices_and_refuse_what_cannot_run():
    work = alexnet()
    compute = device_compute(work, 200.0)
    topo = Topology(2, 4, 25e9)
    ps = predict_mode(work, compute, topo, "ps")
    assert (ps.workers, ps.ps, ps.devices) == (8, 2, 8)
    assert ps.images_per_sec == pytest.approx(8 * 8 / ps.step_time_s)
    ring = predict_mode(work, compute, topo, "horovod", horovod_build="gloo")
    assert "host memory" in ring.note
    nccl = predict_mode(work, compute, topo, "horovod", horovod_build="nccl")
    assert nccl.images_per_sec > ring.images_per_sec
    with pytest.raises(PlannerError, match="not installed"):
        predict_mode(work, compute, topo, "stanza", horovod_build=None)
    with pytest.raises(PlannerError, match="unknown mode"):
        predict_mode(work, compute, topo, "nope")


def _p(mode: str, rate: float) -> ClusterPrediction:
    return ClusterPrediction(mode, 2, 4, 8, 8, 0, 10**10, rate, 1.0)


def test_a_tie_goes_to_the_mode_that_needs_less():
    tied = decide([_p("horovod", 1000.0), _p("ps", 1000.0 / (1 + DECISION_MARGIN / 2))])
    assert tied.best.mode == "ps" and tied.fastest.mode == "horovod" and tied.tie
    assert NEEDS["ps"][0] < NEEDS["horovod"][0]


def test_outside_the_band_the_fastest_wins():
    clear = decide([_p("horovod", 1000.0), _p("ps", 1000.0 / (1 + 2 * DECISION_MARGIN))])
    assert clear.best.mode == "horovod" and not clear.tie
    assert clear.ps.mode == "ps" and clear.runner_up.mode == "ps"


def test_scaled_compute_keeps_the_head_the_difference():
    from ralp.planner.cluster_plan import scale_compute
    from ralp.planner.terms import Compute

    c = scale_compute(Compute(1.0, 0.4, tail_stacked_s=0.6, stacked=3), 1.1, 0.9)
    assert (c.full_s, c.tail_s, c.tail_stacked_s) == pytest.approx((1.1, 0.36, 0.54))
    assert c.head_s == pytest.approx(1.1 - 0.36)


def test_a_close_call_names_the_mode_the_noise_would_choose():
    from ralp.planner.cluster_plan import ClusterPlan
    from ralp.planner.cluster_report import MEASURED_NOISE, close_calls, lead

    def plan(rate_ps: float) -> ClusterPlan:
        return ClusterPlan("m", "m", 8, (_p("horovod", 1000.0), _p("ps", rate_ps)), ())

    edge = 1000.0 / (1 + DECISION_MARGIN) - 1.0  # just outside the margin: horovod chosen

    def replan(full: float, tail: float) -> ClusterPlan:
        return plan(edge * (1 + (full - 1) / 2))  # the noise moves ps by a few per cent

    flips = close_calls(plan(edge), replan)
    assert flips == {(10**10, 2): {"ps"}}
    text = "\n".join(lead(plan(edge), flips))
    assert f"close call: with the measured compute {MEASURED_NOISE:.0%} off, ps" in text
    # far from any edge: no close call
    assert close_calls(plan(500.0), lambda full, tail: plan(500.0)) == {}
