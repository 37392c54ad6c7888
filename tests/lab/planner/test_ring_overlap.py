"""Gloo's ring overlap on budgeted devices: the probe's shape and arithmetic against the model's
own terms, the model's use of it, and one real measurement (two Horovod ranks in namespaces,
each in a control group of its budget)."""

from dataclasses import replace

import pytest

from lab.planner.device_probes import _check_lent, calibrate_device
from lab.planner.host import interpolate_log
from lab.planner.host_calibration import HostCalibration
from lab.planner.ps_step import Compute, Host, Links
from lab.planner.ring_overlap import (
    MAX_TENSOR_BYTES,
    OVERLAP_RATIOS,
    WIRE_PHASE_S,
    WIRE_RATIO,
    RingOverlap,
    measure_ring_overlap,
    overlap_of,
    probe_shape,
    solve_wire_factor,
)
from lab.planner.ring_step import (
    collective_step_time,
    device_bytes_phase,
    horovod_step_time,
    ring_phase_terms,
)
from lab.planner.stanza_step import stanza_phase_times
from lab.planner.validate import with_overlaps
from ralp.emulation.budget import Budget, budget_for
from ralp.emulation.cpu_meter import find_hierarchy
from ralp.planner.modes import PlannerError
from tests.lab.planner.test_ps_step import beside
from tests.needs import HOROVOD_MARKS, needs_netns

HIERARCHY, _ = find_hierarchy()


def test_the_probe_runs_where_wire_and_cpu_take_equally_long():
    host = Host(False, ring_cpu_s_per_byte=1.1e-9, device_cpus=0.425)
    rate_bits, tensor = probe_shape(1.1e-9, 0.425)
    assert tensor % 4 == 0
    wire, cpu = ring_phase_terms(host, 2, tensor, rate_bits / 8, 1.1e-9)
    assert wire == pytest.approx(cpu, rel=1e-3)
    assert wire == pytest.approx(0.15, rel=0.01)  # a tensor of about 0.15 s on the wire
    # a free ring (no CPU per byte) runs at the fastest rate, its tensor capped
    assert probe_shape(0.0, 0.425) == (2 * 10**10, MAX_TENSOR_BYTES)


@pytest.mark.parametrize("ratio", [1 / 3, 3.0])
def test_the_probe_runs_at_the_wire_to_cpu_ratio_asked_for(ratio):
    host = Host(False, ring_cpu_s_per_byte=1.1e-9, device_cpus=0.425)
    rate_bits, tensor = probe_shape(1.1e-9, 0.425, ratio)
    wire, cpu = ring_phase_terms(host, 2, tensor, rate_bits / 8, 1.1e-9)
    assert wire / cpu == pytest.approx(ratio, rel=1e-3)
    assert wire == pytest.approx(0.15, rel=0.01)
    with pytest.raises(ValueError, match="positive"):
        probe_shape(1.1e-9, 0.425, 0.0)


def test_a_calibration_measures_one_ratio_unless_asked_for_a_curve():
    # where the overlap changes the phase most; a curve did not predict the zoo better
    assert OVERLAP_RATIOS == (1.0,)


def test_a_curve_is_read_in_log_ratio_and_held_beyond_its_ends():
    curve = ((0.25, 0.8), (1.0, 0.6), (4.0, 0.2))
    assert interpolate_log(curve, 1.0) == pytest.approx(0.6)
    assert interpolate_log(curve, 2.0) == pytest.approx(0.4)  # halfway in log from 1 to 4
    assert interpolate_log(curve, 0.5) == pytest.approx(0.7)
    assert interpolate_log(curve, 0.01) == 0.8 and interpolate_log(curve, 100.0) == 0.2


def test_the_model_hides_what_the_curve_says_at_the_phase_s_own_ratio():
    cost, cpus = 1.7e-9, 0.425
    rank_bytes = 125_000_000
    cpu_s = cost * rank_bytes / cpus  # 0.5 s
    host = Host(False, ring_cpu_s_per_byte=cost, collective_cpu_s_per_byte=cost,
                device_cpus=cpus, ring_overlap=0.9, ring_overlaps=((1.0, 0.6), (4.0, 0.2)),
                collective_overlaps=((1.0, 0.0), (4.0, 0.0)))
    for wire_s, hidden in ((0.5, 0.6), (1.0, 0.4), (2.0, 0.2), (8.0, 0.2), (0.1, 0.6)):
        assert device_bytes_phase(host, wire_s, rank_bytes) == pytest.approx(
            max(wire_s, cpu_s) + (1 - hidden) * min(wire_s, cpu_s))
        # TensorFlow's ring reads its own curve
        assert device_bytes_phase(host, wire_s, rank_bytes, cost, collective=True) == (
            pytest.approx(wire_s + cpu_s))
    # no curve: the single figure serves every ratio
    single = replace(host, ring_overlaps=())
    assert device_bytes_phase(single, 1.0, rank_bytes) == pytest.approx(1.0 + 0.1 * cpu_s)


@pytest.mark.parametrize("phase, expected", [
    (1.0, 1.0),  # the slower alone: all of the faster hid behind it
    (1.6, 0.0),  # their sum: nothing hid
    (1.3, 0.5),
    (2.0, 0.0),  # slower than both in turn: no overlap (clipped)
    (0.9, 1.0),  # faster than the slower term: all of it (clipped)
])
def test_the_overlap_is_the_hidden_share_of_the_smaller_term(phase, expected):
    assert overlap_of(phase, 1.0, 0.6) == pytest.approx(expected)
    assert overlap_of(phase, 0.6, 1.0) == pytest.approx(expected)


def test_the_model_takes_back_the_phase_the_overlap_was_measured_from():
    host = Host(False, message_s=0.002, ring_cpu_s_per_byte=1.1e-9, device_cpus=0.425)
    rank_bytes, bandwidth = 64e6, 3.2e9 / 8
    wire, cpu = ring_phase_terms(host, 2, rank_bytes, bandwidth, host.ring_cost)
    for measured in (max(wire, cpu) * 1.1, max(wire, cpu) * 1.4):
        measured_host = Host(False, message_s=0.002, ring_cpu_s_per_byte=1.1e-9,
                             device_cpus=0.425, ring_overlap=overlap_of(measured, wire, cpu))
        assert device_bytes_phase(measured_host, wire, rank_bytes) == pytest.approx(measured)


def test_horovod_and_stanza_pay_the_unhidden_cpu_and_collective_keeps_full_overlap():
    compute = Compute(full_s=0.25, tail_s=0.15)
    links = Links((), (), worker_tx=125_000_000, total=500_000_000, messages=6)
    bandwidth = 1e9 / 8  # wire 1 s a step
    cost, cpus = 1.7e-9, 0.425  # CPU 0.5 s a step on the device
    full = Host(False, ring_cpu_s_per_byte=cost, collective_cpu_s_per_byte=cost,
                device_cpus=cpus)
    cpu_s = cost * 125e6 / cpus
    assert horovod_step_time(compute, links, 4, bandwidth, full) == pytest.approx(
        beside(0.25, 1.0, cpu_s))
    for share in (0.0, 0.4):
        part = Host(False, ring_cpu_s_per_byte=cost, collective_cpu_s_per_byte=cost,
                    device_cpus=cpus, ring_overlap=share)
        assert horovod_step_time(compute, links, 4, bandwidth, part) == pytest.approx(
            beside(0.25, 1.0 + (1 - share) * cpu_s, cpu_s))
        # TensorFlow's ring is not Gloo's: Gloo's overlap is not its own
        assert collective_step_time(compute, links, 4, bandwidth, part) == pytest.approx(
            beside(0.25, 1.0, cpu_s))
        own = replace(part, ring_overlap=None, collective_overlap=share)
        assert collective_step_time(compute, links, 4, bandwidth, own) == pytest.approx(
            beside(0.25, 1.0 + (1 - share) * cpu_s, cpu_s))
    stanza = Links(ps_tx=(40_000_000,), ps_rx=(40_000_000,), worker_tx=0, total=0,
                   messages=0, rings=(125_000_000, 0))
    none = stanza_phase_times(compute, stanza, 3, bandwidth, full)["rings"]
    half = stanza_phase_times(compute, stanza, 3, bandwidth,
                              Host(False, ring_cpu_s_per_byte=cost, device_cpus=cpus,
                                   ring_overlap=0.5))["rings"]
    assert half == pytest.approx(none + 0.5 * cost * 125e6 / cpus)


def test_a_calibration_keeps_the_overlap_and_an_older_one_reads_as_unmeasured(tmp_path):
    curve = ((0.33, 0.8), (1.0, 0.37), (3.0, 0.25))
    cal = HostCalibration(Host(False, 1e-9, 0.002, ring_cpu_s_per_byte=1e-9, device_cpus=0.4,
                           ring_overlap=0.37, ring_overlaps=curve))
    cal.save(tmp_path / "c.json")
    back = HostCalibration.load(tmp_path / "c.json").host
    assert back.ring_overlap == 0.37 and back.ring_overlaps == curve  # tuples, not lists
    assert back.collective_overlaps == ()
    older = cal.to_dict()
    del older["host"]["ring_overlap"], older["host"]["ring_overlaps"]
    assert HostCalibration.from_dict(older).host.ring_overlap is None
    assert HostCalibration.from_dict(older).host.ring_overlaps == ()


def test_overlaps_of_another_budget_are_refused_before_anything_is_measured():
    other = Host(False, device_cpus=0.05, ring_overlap=0.5)
    with pytest.raises(PlannerError, match="0.05 CPU|no device budget"):
        calibrate_device("lenet", 8, 28, 10, "0.1", 4, overlaps=other)


@pytest.mark.parametrize("lent, budget, said", [
    (Host(False, device_cpus=0.2, ring_overlap=0.5), Budget(0.4, 2, ("v1",)), "0.2 CPU"),
    (Host(True, ring_overlap=0.5), Budget(0.4, 2, ("v1",)), "not of budgeted devices"),
    (Host(False, device_cpus=0.4), Budget(0.4, 2, ("v1",)), "has no rings' overlaps"),
    (Host(False, device_cpus=0.4, ring_overlap=0.5),
     Budget(None, 2, fallback="no cgroup here"), "no device budget here"),
])
def test_lent_overlaps_must_be_a_budgeted_calibration_s_of_this_budget(lent, budget, said):
    with pytest.raises(PlannerError, match=said):
        _check_lent(lent, budget)
    _check_lent(replace(lent, shared=False, device_cpus=0.4, ring_overlap=0.5),
                Budget(0.4, 2, ("v1",)))  # the same budget's: lent


@pytest.mark.cluster
@needs_netns
@pytest.mark.skipif(HIERARCHY is None, reason="no writable cgroup cpu controller here")
@pytest.mark.parametrize("library, ratio", [
    pytest.param("horovod", 3.0, marks=HOROVOD_MARKS),
    ("collective", 1 / 3),
])
def test_two_budgeted_ranks_measure_a_phase_no_faster_than_their_wire(library, ratio):
    budget = budget_for("auto", 4)
    host = Host(False, 1.2e-9, 0.0025, ring_cpu_s_per_byte=1.1e-9,
                collective_cpu_s_per_byte=1.1e-9, device_cpus=budget.cpus)
    measured = measure_ring_overlap(host, budget, library, ratio)
    assert (measured.rate_bits, measured.tensor_bytes) == probe_shape(
        1.1e-9, budget.cpus, ratio)
    assert measured.ratio == pytest.approx(ratio, rel=0.1)  # hop latencies add a little
    on_wire = measured.tensor_bytes / (measured.rate_bits / 8)
    # the shaped link bounds every allreduce: none beats its bytes at the link's rate
    assert measured.phase_range_s[0] >= 0.9 * on_wire
    assert all(c > 0 for c in measured.rank_cpu_s) and len(measured.rank_cpu_s) == 2
    assert 0.0 <= measured.overlap <= 1.0
    assert measured.overlap == pytest.approx(
        overlap_of(measured.phase_s, measured.wire_s, measured.cpu_s))


def test_overlaps_measured_apart_fill_only_what_a_calibration_lacks():
    older = Host(False, 1e-9, 0.002, device_cpus=0.4, collective_overlap=0.9)
    measured = Host(False, ring_overlap=0.3, collective_overlap=0.2,
                    ring_overlaps=((1.0, 0.3), (3.0, 0.1)), collective_overlaps=((1.0, 0.2),))
    filled = with_overlaps(older, measured)
    assert (filled.ring_overlap, filled.collective_overlap) == (0.3, 0.9)
    # the curves are filled too (the calibration has none), and the model prefers them
    assert filled.ring_overlaps == ((1.0, 0.3), (3.0, 0.1))
    assert filled.overlap_at(3.0) == 0.1 and filled.overlap_at(1.0, collective=True) == 0.2
    assert filled.cpu_s_per_byte == 1e-9 and filled.device_cpus == 0.4


def test_the_wire_bound_probe_runs_a_step_sized_tensor_where_the_wire_is_the_larger_term():
    host = Host(False, ring_cpu_s_per_byte=1.1e-9, device_cpus=0.425)
    rate_bits, tensor = probe_shape(1.1e-9, 0.425, WIRE_RATIO, WIRE_PHASE_S)
    wire, cpu = ring_phase_terms(host, 2, tensor, rate_bits / 8, 1.1e-9)
    assert wire / cpu == pytest.approx(WIRE_RATIO, rel=1e-3)
    assert wire == pytest.approx(WIRE_PHASE_S, rel=0.01)


def test_the_wire_factor_stretches_the_rings_bytes_not_their_hops_or_cpu():
    compute = Compute(full_s=0.25, tail_s=0.15)
    links = Links((), (), worker_tx=125_000_000, total=500_000_000, messages=6)
    bandwidth = 1e9 / 8  # 1 s of bytes a step
    plain = Host(False, message_s=0.001, ring_cpu_s_per_byte=1.7e-9,
                 collective_cpu_s_per_byte=1.7e-9, device_cpus=0.425, ring_overlap=0.0,
                 collective_overlap=0.0)
    slow = replace(plain, ring_wire_factor=1.2)
    (wire, cpu), (wire_slow, cpu_slow) = (ring_phase_terms(h, 4, 125e6, bandwidth, 1.7e-9)
                                          for h in (plain, slow))
    assert wire == pytest.approx(1.0 + 6 * 0.001) and cpu_slow == cpu
    assert wire_slow == pytest.approx(1.2 + 6 * 0.001)
    assert horovod_step_time(compute, links, 4, bandwidth, slow) == pytest.approx(
        horovod_step_time(compute, links, 4, bandwidth, plain) + 0.2)
    # Gloo's factor is not TensorFlow's ring's, and the reverse
    assert collective_step_time(compute, links, 4, bandwidth, slow) == pytest.approx(
        collective_step_time(compute, links, 4, bandwidth, plain))
    own = replace(plain, collective_wire_factor=1.2)
    assert collective_step_time(compute, links, 4, bandwidth, own) == pytest.approx(
        collective_step_time(compute, links, 4, bandwidth, plain) + 0.2)
    # Stanza's exchange and rings are Gloo's transfers: both stretch
    stanza = Links(ps_tx=(40_000_000,), ps_rx=(40_000_000,), worker_tx=0, total=0,
                   messages=0, rings=(125_000_000, 0))
    before, after = (stanza_phase_times(compute, stanza, 3, bandwidth, h) for h in (plain, slow))
    assert after["exchange"] - before["exchange"] == pytest.approx(0.2 * 80e6 / bandwidth)
    assert after["rings"] - before["rings"] == pytest.approx(0.2)
    assert (after["heads"], after["tail"]) == (before["heads"], before["tail"])


def _probe(factor: float, hidden: float, bytes_s: float, cpu_s: float,
           hops_s: float = 0.004) -> RingOverlap:
    """A probe's reading (against a factor of 1) where the ring's wire took ``factor`` times
    its bytes' time and ``hidden`` of its CPU hid behind it."""
    phase = factor * bytes_s + hops_s + (1 - hidden) * cpu_s
    return RingOverlap(overlap_of(phase, bytes_s + hops_s, cpu_s), 10**9, 10**6, phase,
                       (phase, phase), bytes_s + hops_s, cpu_s, (0.1, 0.1), bytes_s)


@pytest.mark.parametrize("factor, hidden", [(1.15, 0.4), (1.0, 0.0), (1.3, 0.9)])
def test_the_wire_factor_and_overlap_are_those_that_give_both_probes_phases(factor, hidden):
    bound = _probe(factor, hidden, bytes_s=1.0, cpu_s=0.2)  # the wire 5 times the CPU
    even = _probe(factor, hidden, bytes_s=0.15, cpu_s=0.15)
    found = solve_wire_factor(bound, even)
    assert found == pytest.approx(factor)
    assert even.against(found).overlap == pytest.approx(hidden)
    # read against it, the model's phase is the one measured at each probe
    for probe in (bound, even):
        read = probe.against(found)
        assert read.wire_s == pytest.approx(factor * probe.bytes_s + 0.004)
        assert max(read.wire_s, read.cpu_s) + (1 - read.overlap) * min(
            read.wire_s, read.cpu_s) == pytest.approx(probe.phase_s)


def test_a_wire_factor_below_one_or_probes_at_one_ratio_read_as_the_links_rate():
    # a wire faster than the links' shaping allows is noise: the rate caps it
    fast = solve_wire_factor(_probe(0.9, 0.5, 1.0, 0.2), _probe(0.9, 0.5, 0.15, 0.15))
    assert fast == 1.0
    same = _probe(1.2, 0.5, 0.15, 0.15)
    assert solve_wire_factor(same, same) == 1.0  # one ratio cannot tell the two apart


def test_a_ring_s_wire_factor_is_lent_with_the_overlaps_measured_with_it():
    own = Host(False, 1e-9, 0.002, device_cpus=0.4, ring_overlap=0.6, collective_overlap=0.9,
               ring_cpu_s_per_byte=1.0e-9, collective_cpu_s_per_byte=2.0e-9)
    measured = Host(False, device_cpus=0.4, ring_wire_factor=1.1, ring_overlap=0.3,
                    collective_overlap=0.2, ring_cpu_s_per_byte=1.3e-9,
                    collective_cpu_s_per_byte=2.2e-9)
    lent = with_overlaps(own, measured)
    # Gloo's: a factor here replaces the overlap and the cost found without it
    assert (lent.ring_wire_factor, lent.ring_overlap) == (1.1, 0.3)
    assert lent.ring_cpu_s_per_byte == 1.3e-9 and lent.collective_cpu_s_per_byte == 2.0e-9
    assert lent.cpu_s_per_byte == 1e-9  # gRPC's cost is the calibration's own
    # TensorFlow's ring has no factor measured: its own overlap stays
    assert (lent.collective_wire_factor, lent.collective_overlap) == (None, 0.9)
    assert lent.wire_factor(collective=True) == 1.0
    kept = with_overlaps(replace(own, ring_wire_factor=1.05), measured)
    assert (kept.ring_wire_factor, kept.ring_overlap) == (1.05, 0.6)  # its own pair
    assert kept.ring_cpu_s_per_byte == 1.0e-9


def test_a_calibration_keeps_the_wire_factors_and_an_older_one_reads_as_the_links_rate(tmp_path):
    cal = HostCalibration(Host(False, device_cpus=0.4, ring_wire_factor=1.12,
                           collective_wire_factor=1.2))
    cal.save(tmp_path / "c.json")
    back = HostCalibration.load(tmp_path / "c.json").host
    assert (back.wire_factor(), back.wire_factor(collective=True)) == (1.12, 1.2)
    older = cal.to_dict()
    del older["host"]["ring_wire_factor"], older["host"]["collective_wire_factor"]
    assert HostCalibration.from_dict(older).host.wire_factor() == 1.0


def test_a_transfers_cpu_is_lent_only_where_a_calibration_predates_its_probe(tmp_path):
    measured = Host(False, device_cpus=0.4, cpu_s_per_message=1e-4)
    assert with_overlaps(Host(False, device_cpus=0.4), measured).cpu_s_per_message == 1e-4
    own = Host(False, device_cpus=0.4, cpu_s_per_message=2e-4)
    assert with_overlaps(own, measured).cpu_s_per_message == 2e-4
    cal = HostCalibration(own)
    cal.save(tmp_path / "c.json")
    assert HostCalibration.load(tmp_path / "c.json").host.cpu_s_per_message == 2e-4
    older = cal.to_dict()
    del older["host"]["cpu_s_per_message"]
    assert HostCalibration.from_dict(older).host.cpu_s_per_message is None


def test_each_timed_allreduce_follows_an_untimed_idle_gap():
    import itertools
    import time

    from lab.planner.allreduce import timed_allreduces

    calls = []
    start = time.perf_counter()
    walls, cpus = timed_allreduces(lambda: calls.append(time.perf_counter()), 3, gap_s=0.05)
    assert len(calls) == 5 and len(walls) == len(cpus) == 3  # two untimed first
    assert all(b - a >= 0.05 for a, b in itertools.pairwise(calls[1:]))  # a gap before each
    assert all(w < 0.05 for w in walls)  # and outside the timing
    assert time.perf_counter() - start >= 0.15


def test_the_figure_is_read_at_the_ratio_nearest_one_in_log_ratio():
    from lab.planner.ring_overlap import nearest_even

    assert nearest_even([(0.4, 0.1), (2.2, 0.2), (3.0, 0.3)]) == (2.2, 0.2)  # log 2.2 < -log 0.4
    assert nearest_even([(0.6, 0.1), (2.0, 0.2)]) == (0.6, 0.1)
    probes = [_probe(1.0, 0.5, 0.3, 0.1), _probe(1.0, 0.5, 0.15, 0.16)]
    assert nearest_even(probes) is probes[1]


def test_grpc_s_cpu_on_the_fabric_is_lent_where_a_calibration_lacks_it(tmp_path):
    curve = ((5e8, 3e-9), (1e9, 2e-9))
    measured = Host(False, device_cpus=0.4, fabric_cpu_s_per_byte=curve)
    assert with_overlaps(Host(False, device_cpus=0.4), measured).fabric_cpu_s_per_byte == curve
    own = Host(False, device_cpus=0.4, fabric_cpu_s_per_byte=((1e9, 1e-9),))
    assert with_overlaps(own, measured).fabric_cpu_s_per_byte == ((1e9, 1e-9),)
    HostCalibration(measured).save(tmp_path / "c.json")  # the curve round-trips, sorted
    assert HostCalibration.load(tmp_path / "c.json").host.fabric_cpu_s_per_byte == curve


def test_each_record_takes_the_lent_calibration_of_its_own_budget():
    from lab.planner.validate import lent_for

    n4, n8 = Host(False, device_cpus=0.425), Host(False, device_cpus=0.2125)
    record = {"calibration": {"host": {"device_cpus": 0.2125}}}
    assert lent_for(record, [n4, n8]) is n8
    assert lent_for({"calibration": {"host": {"device_cpus": 0.3}}}, [n4, n8]) is n4
    assert lent_for(record, []) is None
