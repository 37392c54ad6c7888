"""The per-mode models against independent references: closed-form queueing results and
plain arithmetic of the byte model."""

import math
from dataclasses import replace

import pytest

from lab.planner.device_workload import DeviceLinks
from lab.planner.ps_step import (
    Compute,
    Host,
    Station,
    mva_cycle_time,
    ps_step_time,
    ralp_step_time,
)
from lab.planner.ring_step import horovod_step_time
from ralp.planner.terms import OVERLAP_SHARE


def beside(compute_s: float, ring_s: float, cpu_s: float = 0.0) -> float:
    """By hand: a third of the compute forward, two thirds backward; the ring starts with
    the backward pass's last OVERLAP_SHARE; its CPU and the compute on one processor."""
    forward, backward = compute_s / 3, 2 * compute_s / 3
    return max(compute_s + cpu_s,
               forward + max(backward, (1 - OVERLAP_SHARE) * backward + ring_s))


def repairman_cycle(service: float, think: float, customers: int) -> float:
    """Machine-repairman model (one exponential server, ``customers`` with think time):
    closed-form p0 = 1 / sum_k W!/(W-k)! (D/Z)^k, throughput (1 - p0)/D, cycle W/X."""
    r = service / think
    total = sum(math.perm(customers, k) * r**k for k in range(customers + 1))
    throughput = (1 - 1 / total) / service
    return customers / throughput


@pytest.mark.parametrize("customers", [1, 2, 3, 7, 16])
def test_mva_matches_the_repairman_closed_form(customers):
    stations = [Station("think", 0.7, False), Station("server", 0.3, True)]
    assert mva_cycle_time(stations, customers) == pytest.approx(
        repairman_cycle(0.3, 0.7, customers), rel=1e-9
    )


def test_mva_adds_at_one_worker_and_saturates_at_the_bottleneck():
    stations = [Station("a", 0.2, True), Station("b", 0.5, True), Station("c", 0.1, False)]
    assert mva_cycle_time(stations, 1) == pytest.approx(0.8)
    # Many customers: the busiest queue serves one batch per 0.5 s.
    assert mva_cycle_time(stations, 200) / 200 == pytest.approx(0.5, rel=0.02)


LINKS = DeviceLinks(ps_tx=(600, 400), ps_rx=(600, 400), worker_tx=500, total=2000, messages=10)


def test_ps_one_worker_real_cluster_is_compute_plus_the_busiest_links_two_directions():
    # the worker talks to both PS tasks at once: ps:1's 200 + 200 bytes hide behind ps:0's
    one = DeviceLinks((300, 200), (300, 200), 500, 1000, 10)
    t = ps_step_time(Compute(1.0, 0.2), one, 1, 100.0, Host(shared=False))
    assert t == pytest.approx(1.0 + (300 + 300) / 100.0)


def test_grpc_cost_on_the_fabric_is_read_at_the_links_rate():
    loopback = Host(False, cpu_s_per_byte=1e-9, device_cpus=1.0)
    assert loopback.grpc_cost(1e9) == 1e-9  # not measured on the fabric: loopback's
    fabric = replace(loopback, fabric_cpu_s_per_byte=((5e8, 4e-9), (1e9, 2e-9)))
    assert fabric.grpc_cost(1e9) == pytest.approx(2e-9)
    assert fabric.grpc_cost(5e8) == pytest.approx(4e-9)
    assert fabric.grpc_cost(1e10) == pytest.approx(2e-9)  # the nearest measured beyond
    assert 2e-9 < fabric.grpc_cost(7e8) < 4e-9
    # the model pays it at the links' rate: one worker and one PS, no compute, 1000 bytes
    # through each end; each end's half of 4 ns per byte on its 1-CPU device is 2 us per byte
    links = DeviceLinks(ps_tx=(500,), ps_rx=(500,), worker_tx=500, total=1000, messages=0)
    bandwidth = 5e8 / 8
    wire = 2 * 500 / bandwidth  # each direction a queue, one worker: they add
    assert ps_step_time(Compute(0.0, 0.0), links, 1, bandwidth, fabric) == pytest.approx(
        wire + 2 * 1000 * 2e-9)
    assert ps_step_time(Compute(0.0, 0.0), links, 1, bandwidth, loopback) == pytest.approx(
        wire + 2 * 1000 * 0.5e-9)


def test_link_directions_overlap_on_devices_and_take_turns_on_a_shared_host():
    # No compute, 1 byte/s, 600 bytes each way per step on the one PS link. Many workers fill
    # the link: on devices (and real clusters) each direction is a queue of its own, so both
    # PS modes need only the busier direction (600 s a step); on a shared host plain PS's
    # directions take turns (1200 s).
    links = DeviceLinks(ps_tx=(600,), ps_rx=(600,), worker_tx=600, total=1200, messages=2)
    real = Host(shared=False)
    ps = ps_step_time(Compute(0.0, 0.0), links, 200, 1.0, real)
    ralp = ralp_step_time(Compute(0.0, 0.0), links, 200, 1.0, real)
    assert ps == pytest.approx(600, rel=0.02)
    assert ralp == pytest.approx(600, rel=0.02)
    shared = ps_step_time(Compute(0.0, 0.0), links, 200, 1.0, Host(shared=True, cores=2))
    assert shared == pytest.approx(1200, rel=0.02)
    # one worker alone: nothing to overlap with, both directions in turn in both modes
    assert ralp_step_time(Compute(0.0, 0.0), links, 1, 1.0, real) == pytest.approx(1200)
    assert ps_step_time(Compute(0.0, 0.0), links, 1, 1.0, real) == pytest.approx(1200)


def test_ps_is_bound_by_the_round_robin_heavy_task():
    # Two workers, 1 byte/s: ps:0 moves 600 bytes each way per step, so a step takes at least
    # 600 s (its busier direction) however much the PS tasks and directions overlap, and at
    # most every transfer one after the other.
    t = ps_step_time(Compute(0.0, 0.0), LINKS, 2, 1.0, Host(shared=False))
    assert t >= 600
    assert t <= 600 + 400 + 600 + 400


def test_each_transfer_costs_cpu_at_both_ends_on_devices():
    # One worker (every term adds), no bytes: 100 transfers per batch at 1 ms of CPU each
    # (both ends), on devices of 0.5 CPU. The worker's end: 100 x 0.5 ms / 0.5 = 0.1 s; each
    # of the two PS tasks serves half the variables: 50 x 0.5 ms / 0.5 = 0.05 s.
    links = DeviceLinks(ps_tx=(0, 0), ps_rx=(0, 0), worker_tx=0, total=0, messages=100)
    devices = Host(False, device_cpus=0.5, cpu_s_per_message=1e-3)
    t = ps_step_time(Compute(1.0, 0.2), links, 1, 1.0, devices)
    assert t == pytest.approx(1.0 + 0.1 + 0.05)
    one_ps = DeviceLinks(ps_tx=(0,), ps_rx=(0,), worker_tx=0, total=0, messages=100)
    assert ralp_step_time(Compute(1.0, 0.2), one_ps, 1, 1.0, devices) == pytest.approx(
        1.0 + 0.1 + 0.1)  # RALP's one PS serves every transfer (head 0.8 s + tail 0.2 s)
    # not measured (an older calibration), or a real cluster's node: no cost
    unmeasured = Host(False, device_cpus=0.5)
    assert ps_step_time(Compute(1.0, 0.2), links, 1, 1.0, unmeasured) == pytest.approx(1.0)
    real = Host(False, cpu_s_per_message=1e-3)
    assert ps_step_time(Compute(1.0, 0.2), links, 1, 1.0, real) == pytest.approx(1.0)


def test_ralp_tail_is_serialised_on_a_real_cluster():
    no_net = DeviceLinks((0,), (0,), 0, 0, 0)
    t = ralp_step_time(Compute(1.0, 0.5), no_net, 8, 1.0, Host(shared=False))
    assert t >= 8 * 0.5  # the PS runs eight tails one after the other
    shared = ralp_step_time(Compute(1.0, 0.5), no_net, 8, 1.0, Host(shared=True))
    assert shared == pytest.approx(8 * 1.0)  # one host: all heads and tails queue for it


def test_horovod_runs_the_ring_beside_the_backward_pass():
    links = DeviceLinks((), (), worker_tx=750, total=3000, messages=6)
    host = Host(shared=False, message_s=0.01)
    assert horovod_step_time(Compute(1.0, 0.1), links, 4, 100.0, host) == pytest.approx(
        beside(1.0, 7.5 + 6 * 0.01))
    assert beside(1.0, 7.5 + 6 * 0.01) < 1.0 + 7.5 + 6 * 0.01  # shorter than in turn
    # a shared host (an older calibration: no cores): the ring's CPU on the one CPU queue
    shared = Host(shared=True, cpu_s_per_byte=1e-3)
    assert horovod_step_time(Compute(1.0, 0.1), links, 4, 100.0, shared) == pytest.approx(
        beside(4 * 1.0, 3.0 + 7.5, 3.0))


def test_shared_host_charges_cpu_for_bytes_moved():
    base = ps_step_time(Compute(1.0, 0.2), LINKS, 2, 1e9, Host(shared=True))
    costly = ps_step_time(Compute(1.0, 0.2), LINKS, 2, 1e9, Host(True, cpu_s_per_byte=1e-3))
    # 2000 bytes per step at 1 ms each, on the one CPU queue both workers share.
    assert costly - base == pytest.approx(2.0, rel=0.01)


# ---------------------------------------------------------------- stanza


def test_stanza_step_adds_its_phases_on_a_real_cluster():
    from lab.planner.ps_step import Compute, Host
    from lab.planner.stanza_step import stanza_phase_times, stanza_step_time

    # 5 CONV ranks, 2 FC ranks (groups of 3 and 2): the busier FC link carries 3 groups' worth.
    links = DeviceLinks(ps_tx=(300 + 40, 200 + 40), ps_rx=(330 + 40, 220 + 40), worker_tx=999,
                  total=5000, messages=10, rings=(80, 40))
    host = Host(False, message_s=0.001)
    step = stanza_step_time(Compute(1.0, 0.25), links, 5, 100.0, host)
    head, tail = 0.75, 0.25
    exchange = (300 + 330) / 100.0  # in and out of the busier FC link, rings apart
    rings = max(80 / 100.0 + 2 * 4 * 0.001, 40 / 100.0 + 2 * 1 * 0.001)
    assert step == pytest.approx(3 * tail + exchange + beside(head, rings))
    phases = stanza_phase_times(Compute(1.0, 0.25), links, 5, 100.0, host)
    assert phases == pytest.approx({"heads": head, "tail": 3 * tail, "exchange": exchange,
                                    "rings": rings})


def test_stanza_on_a_shared_host_queues_every_ranks_compute():
    from lab.planner.ps_step import Compute, Host
    from lab.planner.stanza_step import stanza_step_time

    links = DeviceLinks((100,), (120,), 50, 1000, 2, rings=(10, 0))
    host = Host(True, cpu_s_per_byte=1e-3, capacity=2.0)  # an older calibration: no cores
    step = stanza_step_time(Compute(1.0, 0.25), links, 3, 10.0, host)
    # the 3 heads together at the capacity, the FC rank's 3 tails alone, then each byte
    # phase's wire and its bytes' CPU (the rings: 3 x 10 B; the exchange: the rest), added
    assert step == pytest.approx(3 * 0.25 + (220 / 10.0 + 970e-3 / 2.0)
                                 + beside(3 * 0.75 / 2.0, 10 / 10.0 + 30e-3 / 2.0, 30e-3 / 2.0))


def test_a_shared_host_serves_bytes_cpu_on_every_core_and_horovod_pays_gloos_rate():
    from lab.planner.stanza_step import stanza_step_time

    links = DeviceLinks((), (), 300, 1200, 6)  # 4 ranks: 300 B sent each, 1200 B on all links
    compute = Compute(0.5, 0.1)
    # the 4 ranks compute together at the capacity; then the ring: its bytes' CPU seconds
    # over 2 cores (1200 x 4e-4 / 2 = 0.24 s) or its wire, the slower
    host = Host(True, cpu_s_per_byte=1e-3, message_s=0.0, capacity=1.25, cores=2,
                ring_cpu_s_per_byte=4e-4)
    assert horovod_step_time(compute, links, 4, 1e6, host) == pytest.approx(
        4 * 0.5 / 1.25 + 1200 * 4e-4 / 2)  # CPU-bound: the ring's CPU cannot hide
    assert horovod_step_time(compute, links, 4, 100.0, host) == pytest.approx(
        beside(4 * 0.5 / 1.25, 300 / 100.0, 1200 * 4e-4 / 2))
    # no ring cost measured: gRPC's serves
    grpc = Host(True, cpu_s_per_byte=1e-3, capacity=1.25, cores=2)
    assert horovod_step_time(compute, links, 4, 1e6, grpc) == pytest.approx(
        4 * 0.5 / 1.25 + 1200 * 1e-3 / 2)
    # an older calibration (no cores: its per-byte cost was wall time): wire and CPU add
    old = Host(True, cpu_s_per_byte=1e-3, capacity=1.25)
    assert horovod_step_time(compute, links, 4, 1e6, old) == pytest.approx(
        beside(4 * 0.5 / 1.25, 300 / 1e6 + 1200 * 1e-3 / 1.25, 1200 * 1e-3 / 1.25))
    # stanza's bytes are Horovod collectives too (here under their wire)
    fc = DeviceLinks((100,), (120,), 50, 1000, 2, rings=(10, 0))
    assert stanza_step_time(compute, fc, 3, 1e6, host) == pytest.approx(
        3 * 0.1 + 970 * 4e-4 / 2 + beside(3 * 0.4 / 1.25, 30 * 4e-4 / 2, 30 * 4e-4 / 2))
    # the PS modes' bytes are gRPC's, on every core: one worker (alone: its own speed, not
    # the capacity's), so the terms add
    ps = DeviceLinks((40,), (60,), 100, 100, 4)
    assert ps_step_time(compute, ps, 1, 100.0, host) == pytest.approx(
        0.5 + 100 * 1e-3 / 2 + 100 / 100.0)


def test_stanzas_fc_rank_pays_the_stacked_tails_measured_line_not_g_tails():
    from lab.planner.stanza_step import stanza_step_time

    # one batch 0.25 s, four stacked 0.4 s: 0.05 s per further batch
    compute = Compute(1.0, 0.25, tail_stacked_s=0.4, stacked=4)
    assert compute.tail_group_s(1) == pytest.approx(0.25)
    assert compute.tail_group_s(3) == pytest.approx(0.35)
    assert compute.tail_group_s(8) == pytest.approx(0.25 + 7 * 0.05)  # extrapolated
    assert Compute(1.0, 0.25).tail_group_s(3) == pytest.approx(0.75)  # unmeasured: linear
    links = DeviceLinks((100,), (120,), 50, 1000, 2, rings=(10, 0))
    real = Host(False)
    assert stanza_step_time(compute, links, 3, 10.0, real) == pytest.approx(
        0.35 + 220 / 10.0 + beside(0.75, 10 / 10.0))
    shared = Host(True, cpu_s_per_byte=1e-3, capacity=2.0, cores=2)
    assert stanza_step_time(compute, links, 3, 1e6, shared) == pytest.approx(
        0.35 + 970 * 1e-3 / 2 + beside(3 * 0.75 / 2.0, 30 * 1e-3 / 2, 30 * 1e-3 / 2))


def multi_server_repairman_cycle(service: float, think: float, servers: int,
                                 customers: int) -> float:
    """M/M/m//N (machine repairman with m repairmen), closed form: P(k) proportional to
    N!/(N-k)! (D/Z)^k / (k! for k <= m, m! m^(k-m) above); throughput sum P(k) min(k, m)/D."""
    r = service / think
    weights = [math.perm(customers, k) * r**k /
               (math.factorial(k) if k <= servers else math.factorial(servers) * servers ** (k - servers))
               for k in range(customers + 1)]
    total = sum(weights)
    throughput = sum(w / total * min(k, servers) for k, w in enumerate(weights)) / service
    return customers / throughput


@pytest.mark.parametrize("servers, customers", [(2, 1), (2, 2), (2, 5), (3, 4), (4, 16)])
def test_load_dependent_mva_matches_the_multi_server_closed_form(servers, customers):
    speedup = tuple(float(min(j, servers)) for j in range(1, customers + 1))
    stations = [Station("think", 0.9, False), Station("servers", 0.6, True, speedup)]
    assert mva_cycle_time(stations, customers) == pytest.approx(
        multi_server_repairman_cycle(0.6, 0.9, servers, customers), rel=1e-9)


def test_a_speedup_of_one_is_the_load_independent_queue():
    plain = [Station("a", 0.2, True), Station("b", 0.5, True), Station("c", 0.1, False)]
    flat = [plain[0], Station("b", 0.5, True, (1.0,)), plain[2]]
    for n in (1, 2, 5, 9):
        assert mva_cycle_time(flat, n) == pytest.approx(mva_cycle_time(plain, n), rel=1e-12)


def test_capacity_at_a_process_count_is_the_measured_one_at_or_below_it():
    host = Host(True, capacity=1.2, capacities=((2, 1.2), (4, 0.9)))
    assert [host.capacity_at(n) for n in (1, 2, 3, 4, 8)] == [1.0, 1.2, 1.2, 0.9, 0.9]
    assert host.speedups(3) == (1.0, 1.2, 1.2)
    assert Host(True, capacity=1.5).capacity_at(7) == 1.5  # one count measured: every count
    # the lockstep modes: 4 ranks compute at the 4-process capacity
    links = DeviceLinks((), (), 300, 1200, 6)
    assert horovod_step_time(Compute(0.5, 0.1), links, 4, 1e12, host) == pytest.approx(
        4 * 0.5 / 0.9 + 300 / 1e12 + 1200 * 0.0 / 1.2)


def test_stanzas_phases_measured_under_horovod_replace_the_single_process_ones():
    from lab.planner.host_calibration import SharedCompute
    from lab.planner.ps_step import Compute, Host
    from lab.planner.stanza_step import stanza_phase_times

    host = Host(True, cpu_s_per_byte=0.0, capacity=1.2, capacities=((2, 1.2), (4, 1.1)), cores=2)
    links = DeviceLinks(ps_tx=(100,), ps_rx=(100,), worker_tx=0, total=200, messages=4, rings=(0, 0))
    alone = Compute(0.3, 0.15, tail_stacked_s=0.19, stacked=4, head_measured_s=0.05)
    measured = SharedCompute(0.3, 0.15, tail_stacked_s=0.19, stacked=4, head_measured_s=0.05,
                             stanza_beside=(3, 0.25, 0.33))
    # at the shape it was measured on (3 CONV ranks, 1 FC rank), the measured phases
    at_probe = stanza_phase_times(measured, links, 3, 1e9, host)
    assert at_probe["heads"] == pytest.approx(0.25) and at_probe["tail"] == pytest.approx(0.33)
    # elsewhere, the single-process phases stretched by the same measured factors
    heads_alone_3 = 3 * 0.05 / 1.2  # three heads at the capacity for 2-3 processes
    tail_alone_3 = 0.15 + 2 * (0.19 - 0.15) / 3  # the stacked-tail line at 3 batches
    plain, stretched = (stanza_phase_times(c, links, 5, 1e9, host) for c in (alone, measured))
    assert plain["heads"] == pytest.approx(5 * 0.05 / 1.1)
    assert stretched["heads"] == pytest.approx(plain["heads"] * 0.25 / heads_alone_3)
    assert stretched["tail"] == pytest.approx(plain["tail"] * 0.33 / tail_alone_3)
    assert stretched["exchange"] == plain["exchange"] and stretched["rings"] == plain["rings"]
    # a real cluster (no shared host) has no waiting ranks on its cores: no stretch
    real = Host(False)
    assert stanza_phase_times(measured, links, 3, 1e9, real) == stanza_phase_times(
        alone, links, 3, 1e9, real)
