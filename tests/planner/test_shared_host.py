"""Mode auto on a cluster whose tasks share this host (a ``ralp.LocalCluster``): its bytes
cost the CPUs that compute, so an FC-heavy model whose plain-PS pulls and pushes would ride
a 10 Gbit/s NIC for free on machines of their own is RALP's on one host."""

from dataclasses import replace

import keras
import pytest

from ralp.cluster.spec import local_spec
from ralp.planner.auto import TaskLinks, choose_on_tasks
from ralp.planner.cluster_plan import predict_on_tasks, task_layout
from ralp.planner.estimate import DeviceRates, estimate_compute
from ralp.planner.topology import SharedCPU, ps_family_step_s
from ralp.planner.workload import Workload
from ralp.profiler.api import profile

# About this 2-core host: its FLOP rates and its loopback probe's figures.
RATES = DeviceRates(conv_flops_per_s=2.5e11, fc_flops_per_s=5.6e10, other_flops_per_s=4.4e9,
                    per_layer_s=2.6e-4)
HOST = SharedCPU(cores=2, step_cores=1.0, cpu_s_per_byte=1.1e-9, cpu_s_per_transfer=5e-5,
                 bytes_per_s=7e8)
CLUSTER = local_spec(2, 1)


def _convnet_fc():
    """The keras.io convnet's shape with a wide head: a 51 MB Dense kernel after two convs."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((64, 64, 3))
    x = keras.layers.Conv2D(32, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(64, 3, activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(1024, activation="relu")(x)
    x = keras.layers.Dense(512, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(10)(x), name="convnet_fc")


@pytest.fixture(scope="module")
def workload():
    work = Workload(profile(_convnet_fc(), 64))
    return work, estimate_compute(work.table, work.offloaded, RATES)


def test_on_one_host_the_fc_heavy_model_is_ralps_and_on_machines_of_their_own_plain_pss(
        workload):
    work, compute = workload
    on_machines = choose_on_tasks(work, compute, CLUSTER, TaskLinks("10gbit"), "fixed")
    on_host = choose_on_tasks(work, compute, CLUSTER, TaskLinks(None, HOST), "fixed")
    assert on_machines.mode == "ps"
    assert on_host.mode == "ralp"
    figures = on_host.predicted_images_per_sec
    assert figures["ralp"] > 1.2 * figures["ps"]  # measured here: RALP 35% faster
    assert "loopback" in on_host.why and "assumed" not in on_host.why


@pytest.mark.parametrize("mode", ["ps", "ralp-n"])
@pytest.mark.parametrize("workers", [2, 4])
def test_a_shared_hosts_step_is_the_longer_of_the_familys_at_loopback_and_its_cpus_work(
        workload, mode, workers):
    work, compute = workload
    host = replace(HOST, step_cores=2.0)  # each step keeps both cores busy
    predicted = predict_on_tasks(work, compute, mode, workers, 1, None, shared=host)
    layout, topo = task_layout(work, mode, workers, 1, compute)
    links = work.links_on(mode, workers, 1)
    own = ps_family_step_s(compute, layout, replace(topo, nic_bits=8 * 7e8))
    cpus = (workers * compute.full_s * 2.0 + links.total * 1.1e-9
            + workers * links.messages * 5e-5) / 2
    assert predicted.step_time_s == pytest.approx(max(own, cpus))
    assert predicted.images_per_sec == pytest.approx(workers * 64 / max(own, cpus))
    if mode == "ralp-n" and workers == 4:  # the case where the shared cores bind
        assert cpus > 1.2 * own
    # a link rate the user gives caps loopback's
    capped = predict_on_tasks(work, compute, mode, workers, 1, 1e8, shared=host)
    assert capped.bandwidth == 10**8 and capped.step_time_s >= predicted.step_time_s
