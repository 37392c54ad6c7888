"""TensorFlow's own ring cost on this host, measured with two real workers
(MultiWorkerMirroredStrategy on loopback), and the collective mode's step-time model."""

import pytest

from lab.planner.collective_cost import measure_collective
from lab.planner.ps_step import Compute, Host, Links
from lab.planner.ring_step import collective_step_time, horovod_step_time


@pytest.mark.cluster
def test_bigger_allreduces_cost_more_cpu_and_the_slope_is_theirs():
    small, big = 1024**2, 16 * 1024**2
    per_byte, points = measure_collective(sizes=(small, big), repeats=2)
    assert [(p[0], p[1]) for p in points] == [(small, 2 * small), (big, 2 * big)]
    (_, x0, cpu_small), (_, x1, cpu_big) = points
    assert cpu_big > cpu_small > 0
    assert per_byte == pytest.approx((cpu_big - cpu_small) / (x1 - x0), rel=1e-6)


def test_the_collective_step_is_horovods_with_tensorflows_ring_cost():
    compute = Compute(full_s=0.25, tail_s=0.15)
    links = Links((), (), worker_tx=150_000_000, total=600_000_000, messages=6)
    gloo, grpc_ring = 1.0e-9, 2.4e-9
    host = Host(False, 1.1e-9, 0.004, ring_cpu_s_per_byte=gloo,
                collective_cpu_s_per_byte=grpc_ring, device_cpus=0.425)
    bandwidth = 10e9 / 8  # fast links: the rings' CPU on the device bounds the phase
    hvd = horovod_step_time(compute, links, 4, bandwidth, host)
    coll = collective_step_time(compute, links, 4, bandwidth, host)
    assert hvd == pytest.approx(0.25 + gloo * 150e6 / 0.425)
    assert coll == pytest.approx(0.25 + grpc_ring * 150e6 / 0.425)
    slow = 1e9 / 8  # slow links: the wire bounds both, the same step
    assert collective_step_time(compute, links, 4, slow, host) == pytest.approx(
        horovod_step_time(compute, links, 4, slow, host))
    # no measured TensorFlow ring: gRPC's transfer cost, its transport, serves
    bare = Host(False, 1.1e-9, 0.004, device_cpus=0.425)
    assert bare.collective_cost == 1.1e-9


def test_without_tensorflows_ring_cost_collective_is_not_predicted_on_devices():
    from lab.planner.predict import predict
    from ralp.models import build_model
    from ralp.planner.modes import PlannerError
    from ralp.planner.workload import Workload
    from ralp.profiler.api import profile

    work = Workload(profile(build_model("lenet", 10, 28), 8))
    compute = Compute(full_s=0.01, tail_s=0.004)
    devices = Host(False, 1.1e-9, 0.004, ring_cpu_s_per_byte=1e-9, device_cpus=0.425)
    with pytest.raises(PlannerError, match="TensorFlow's ring cost"):
        predict(work, compute, devices, "collective", 4, 10**9)
    measured = Host(False, 1.1e-9, 0.004, collective_cpu_s_per_byte=2.4e-9, device_cpus=0.425)
    assert predict(work, compute, measured, "collective", 4, 10**9).images_per_sec > 0
    real = Host(False)  # a real cluster's node: its spare cores hide the bytes' CPU
    assert predict(work, compute, real, "collective", 4, 10**9).images_per_sec > 0
