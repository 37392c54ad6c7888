"""Horovod's ring cost on this host, measured with two real ranks (Gloo on loopback)."""

import warnings

import pytest

from lab.planner import allreduce, collective_cost, probes
from lab.planner.allreduce import AllreduceProbeError, measure_allreduce, ring_link_bytes
from tests.needs import needs_horovod


def test_a_ring_of_w_ranks_moves_2_w_minus_1_times_the_tensor():
    # every rank sends 2 (W - 1) / W of the tensor: W of them
    assert ring_link_bytes(1000, 2) == 2000
    assert ring_link_bytes(1000, 4) == 6000


@pytest.mark.cluster
@needs_horovod
def test_bigger_allreduces_cost_more_cpu_and_the_slope_is_theirs():
    small, big = 1024**2, 16 * 1024**2
    per_byte, points = measure_allreduce(sizes=(small, big), repeats=2)
    assert [(p[0], p[1]) for p in points] == [(small, 2 * small), (big, 2 * big)]
    (_, x0, cpu_small), (_, x1, cpu_big) = points
    assert cpu_big > cpu_small > 0
    assert per_byte == pytest.approx((cpu_big - cpu_small) / (x1 - x0), rel=1e-6)


def test_without_horovodrun_the_probe_says_so(monkeypatch):
    monkeypatch.setattr(allreduce, "probe_command", lambda sizes, repeats: ["/nonexistent/hr"])
    with pytest.raises(AllreduceProbeError, match="horovodrun is not installed"):
        measure_allreduce()


@pytest.mark.cluster
def test_a_calibration_without_the_ring_cost_warns_and_uses_grpcs(monkeypatch):
    def missing(*args, **kwargs):
        raise AllreduceProbeError("horovodrun is not installed")

    monkeypatch.setattr(collective_cost, "measure_allreduce", missing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        host = probes.transfer_host(shared_host=True, capacity=1.5)
    assert any("ring cost not measured" in str(w.message) for w in caught)
    assert host.ring_cpu_s_per_byte is None and host.ring_cost == host.cpu_s_per_byte > 0
    assert host.shared and host.capacity == 1.5 and host.cores >= 1
