"""The real-cluster step formulas (ralp.planner.topology) against hand computations."""

import pytest

from ralp.planner.modes import PlannerError
from ralp.planner.terms import OVERLAP_SHARE, Compute, behind_backward_s
from ralp.planner.topology import (
    PSLayout,
    SharedCPU,
    StanzaLayout,
    Topology,
    ps_family_step_s,
    ring_allreduce_s,
    ring_step_s,
    shared_cpu_step_s,
    stanza_step_s,
)

GB = 8e9  # 1 GB/s in bits/s


def test_a_ring_over_nodes_crosses_the_nic_and_inside_one_node_the_gpu_links():
    topo = Topology(nodes=2, gpus_per_node=4, nic_bits=1 * GB, intra_bits=10 * GB)
    # 8 ranks: each sends 2 * 7/8 of 8 GB through its slowest hop, the NIC at 1 GB/s
    assert ring_allreduce_s(8e9, 8, topo) == pytest.approx(2 * 7 / 8 * 8)
    # 4 ranks fit in one node: the GPUs' links at 10 GB/s
    assert ring_allreduce_s(8e9, 4, topo) == pytest.approx(2 * 3 / 4 * 8 / 10)
    assert ring_allreduce_s(8e9, 1, topo) == 0.0


def test_transfers_run_beside_the_backward_passs_last_share():
    # 1 s of backward pass: transfers start once its first (1 - share) is done
    assert behind_backward_s(1.0, 0.5) == 1.0
    assert behind_backward_s(1.0, 3.0) == pytest.approx((1 - OVERLAP_SHARE) + 3.0)
    assert behind_backward_s(1.0, 3.0, share=1.0) == 3.0  # all of it: the longer
    assert behind_backward_s(1.0, 3.0, share=0.0) == 4.0  # none: one after the other
    assert 0.5 < OVERLAP_SHARE <= 1.0


def test_a_ring_step_hides_the_ring_and_host_copies_behind_the_backward_pass():
    topo = Topology(2, 2, 1 * GB, 4 * GB)
    compute = Compute(full_s=0.6, tail_s=0.1)  # forward 0.2 s, backward 0.4 s
    ring = 2 * 3 / 4 * 2.0  # 2 GB over 4 ranks at 1 GB/s: longer than the backward pass
    rest = (1 - OVERLAP_SHARE) * 0.4
    assert ring_step_s(compute, 2e9, topo) == pytest.approx(0.2 + rest + ring)
    assert ring_step_s(compute, 2e9, topo, through_host=True) == pytest.approx(
        0.2 + rest + ring + 2 * 2.0 / 4)
    # a ring shorter than the backward pass's share hides whole: the compute alone
    assert ring_step_s(Compute(full_s=30.0, tail_s=0.0), 2e9, topo) == pytest.approx(30.0)


def test_a_synchronous_ps_step_exposes_the_pulls_and_hides_the_pushes_in_the_backward():
    topo = Topology(2, 1, 1 * GB, 10 * GB)
    # one worker and one PS task per node, 1 GB of variables on each task
    layout = PSLayout((1, 1), 1, (1e9, 1e9))
    compute = Compute(full_s=9.0, tail_s=0.0)
    # pull phase: each NIC carries 1 GB out (its PS to the other worker) and 1 GB in
    pull = 1.0
    gpu_link = 2e9 / 10e9
    # forward 3 s, backward 6 s hides the pushes (1.2 s)
    assert ps_family_step_s(compute, layout, topo, "bsp") == pytest.approx(
        pull + gpu_link + 3.0 + 6.0)
    short = Compute(full_s=0.3, tail_s=0.0)  # backward 0.2 s: the pushes show
    assert ps_family_step_s(short, layout, topo, "bsp") == pytest.approx(
        2 * (pull + gpu_link) + 0.1 + (1 - OVERLAP_SHARE) * 0.2)


def test_an_asynchronous_ralp_step_is_bound_by_the_tails_in_the_ps_critical_section():
    topo = Topology(1, 8, 100 * GB, 100 * GB)
    layout = PSLayout((7,), 1, (1e6,), boundary_bytes=1e6, tail_s=0.05)
    compute = Compute(full_s=0.2, tail_s=0.05)
    assert ps_family_step_s(compute, layout, topo) == pytest.approx(7 * 0.05)


def test_unknown_sync_is_refused():
    with pytest.raises(PlannerError, match="bsp"):
        ps_family_step_s(Compute(1, 0), PSLayout((1,), 1, (1.0,)), Topology(1, 1, GB), "ssp")


def test_stanza_phases_follow_one_another_with_the_rings_behind_the_backward_passes():
    topo = Topology(2, 2, 1 * GB, 10 * GB)
    layout = StanzaLayout(conv=3, fc=1, head_bytes=3e9, tail_bytes=1e9, boundary_bytes=1e8)
    compute = Compute(full_s=1.05, tail_s=0.3)
    forward, backward, tail = 0.25, 0.5, 3 * 0.3  # the heads' passes, the group's tail
    exchange = 2 * 1 * 3 * 1e8 / 1e9
    ring = 2 * 2 / 3 * 3.0  # the head's ring over 3 ranks, spanning nodes
    assert stanza_step_s(compute, layout, topo) == pytest.approx(
        forward + exchange + tail + (1 - OVERLAP_SHARE) * backward + ring)
    # two FC ranks on two nodes: the tail's ring (1 GB over 2 ranks at 1 GB/s) starts inside
    # the tail's backward pass (0.2 s of its 0.3 s) and outlasts the heads' backward pass
    two = StanzaLayout(conv=2, fc=2, head_bytes=1e6, tail_bytes=1e9, boundary_bytes=1e8)
    tail_backward = 2 / 3 * 0.3
    left = (1 - OVERLAP_SHARE) * tail_backward + 1.0 - tail_backward
    assert stanza_step_s(compute, two, Topology(2, 1, 1 * GB, 10 * GB)) == pytest.approx(
        forward + 2 * 1e8 / 1e9 + 0.3 + left)


def test_a_cluster_needs_a_node_and_positive_rates():
    with pytest.raises(PlannerError):
        Topology(0, 4, GB)
    with pytest.raises(PlannerError):
        Topology(1, 4, 0)


def test_the_busiest_nic_is_where_the_workers_pull_from_every_ps_at_once():
    topo = Topology(3, 4, 1 * GB, 1000 * GB)
    # the PS tasks on nodes 0 and 1 (2 GB each), four workers on node 2: its NIC takes in
    # 4 x 4 GB while each PS node sends 8 GB
    layout = PSLayout((0, 0, 4), 1, (2e9, 2e9))
    compute = Compute(full_s=3.0, tail_s=0.0)
    pull = 16.0
    step = ps_family_step_s(compute, layout, topo, "bsp")
    assert step == pytest.approx(pull + 4e9 / 1000e9 + 1.0
                                 + max(2.0, (1 - OVERLAP_SHARE) * 2.0 + pull + 4e-3))


def test_a_shared_hosts_step_is_every_workers_compute_and_moved_bytes_over_its_cores():
    host = SharedCPU(cores=2, step_cores=1.5, cpu_s_per_byte=1e-9, cpu_s_per_transfer=1e-4,
                     bytes_per_s=1e9)
    compute = Compute(0.1, 0.04, head_measured_s=0.06)
    # 3 workers: 3 x 0.1 s at 1.5 busy cores, 200 MB at 1 ns and 60 tensors at 0.1 ms of CPU
    # each, on 2 cores
    assert shared_cpu_step_s(compute, 3, 200e6, 60, host) == pytest.approx(
        (3 * 0.1 * 1.5 + 0.2 + 0.006) / 2)
    assert host.loopback_bits == 8e9
