"""Calibration JSON and the measurement of a model's head and tail (in one process)."""

import json

import pytest

from ralp.planner.calibration import Calibration, Entry
from ralp.planner.model import Host
from ralp.planner.modes import PlannerError


def entry(model="vgg11", full=1.0, tail=0.2):
    return Entry(model, 8, 75, 1000, "pool5", full, tail, 5)


def test_round_trip_and_lookup(tmp_path):
    cal = Calibration(Host(True, 1e-9, 1e-3), [entry()], "here")
    cal.add(entry(full=2.0))  # replaces the entry with the same key
    path = tmp_path / "cal.json"
    cal.save(path)
    back = Calibration.load(path)
    assert back.host == Host(True, 1e-9, 1e-3)
    assert back.find("vgg11", 8, 75, 1000).compute.full_s == 2.0
    assert back.find("vgg11", 8, 75, 1000).compute.head_s == pytest.approx(1.8)


def test_a_missing_entry_says_how_to_measure_it():
    with pytest.raises(PlannerError, match="--calibrate --model alexnet --batch-size 8"):
        Calibration(Host(False), [entry()]).find("alexnet", 8, 75, 1000)


def test_bad_files_are_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": 99}))
    with pytest.raises(PlannerError, match="cannot read calibration"):
        Calibration.load(path)


def test_another_hosts_profile_replaces_this_ones():
    here = Calibration(Host(True, 2e-9), [entry(), entry("alexnet")])
    gpu = Calibration(Host(False), [entry(full=0.01, tail=0.001)], "gpu host")
    merged = here.merged(gpu)
    assert merged.host == Host(False) and merged.machine == "gpu host"
    assert merged.find("vgg11", 8, 75, 1000).full_s == 0.01
    assert merged.find("alexnet", 8, 75, 1000).full_s == 1.0


def test_measure_times_the_whole_model_and_its_tail():
    from ralp.models import build_model
    from ralp.planner.calibration import measure
    from ralp.planner.workload import Workload
    from ralp.profiler.api import profile

    model = build_model("lenet", 10, 28)
    work = Workload(profile(model, 4))
    e = measure(model, 4, tuple(r.name for r in work.table.rows), work.offloaded,
                model_name="lenet", image_size=28, num_classes=10,
                split_after=work.profile.candidate_split_after, steps=2)
    assert work.offloaded, "lenet has FC layers to offload"
    assert 0 < e.tail_s <= e.full_s
    assert e.split_after == work.profile.candidate_split_after
    # the tail also timed on 4 batches stacked (Stanza's FC rank), and the entry's compute
    # carries both points
    assert e.stacked == 4 and e.tail_stacked_s > 0
    # (never below one batch's: a stacked time under it is noise, the line stays flat)
    assert e.compute.tail_group_s(4) == pytest.approx(max(e.tail_s, e.tail_stacked_s))
    # the head timed on its own, and used for the head in place of full - tail (lenet's
    # head is most of its step: on a busy host its own median came out 0.3% above the
    # whole model's, so the bound leaves the timing noise room)
    assert 0 < e.head_s <= 1.2 * e.full_s and e.compute.head_s == e.head_s


def test_a_workloads_measured_capacity_applies_on_a_shared_host_only():
    e = Entry("vgg11", 8, 75, 1000, "pool5", 1.0, 0.2, 5, capacity=2.2)
    assert e.host_for(Host(True, capacity=1.3)).capacity == 2.2
    assert e.host_for(Host(False)) == Host(False)
    assert entry().host_for(Host(True, capacity=1.3)).capacity == 1.3  # none measured


def test_calibrations_written_before_per_workload_capacity_still_load(tmp_path):
    path = tmp_path / "old.json"
    old = Calibration(Host(True, 1e-9, 1e-3, 1.4), [entry()]).to_dict()
    for e in old["entries"]:
        del e["capacity"]
    path.write_text(json.dumps(old))
    assert Calibration.load(path).entries[0].capacity is None


def test_measured_capacities_per_process_count_round_trip_into_the_host(tmp_path):
    e = Entry("vgg11", 8, 75, 1000, "pool5", 1.0, 0.2, 5, capacity=1.2,
              capacities=[[2, 1.2], [4, 0.9]])
    host = Host(True, 1e-9, 1e-3, 1.2, capacities=((2, 1.2), (4, 0.9)), cores=2,
                ring_cpu_s_per_byte=2e-9)
    path = tmp_path / "cal.json"
    Calibration(host, [e]).save(path)
    back = Calibration.load(path)
    assert back.host == host
    on = back.entries[0].host_for(Host(True, capacity=1.0))
    assert [on.capacity_at(n) for n in (1, 2, 3, 4, 6)] == [1.0, 1.2, 1.2, 0.9, 0.9]


def test_the_step_functions_are_timed_in_turn_so_the_hosts_drift_falls_on_all(monkeypatch):
    from ralp.planner import calibration

    clock, calls = [0.0], []

    def step(name, cost):  # a host slowing down by 10% of a step's cost with every call
        def run():
            clock[0] += cost * (1 + 0.1 * len(calls))
            calls.append(name)
        return run

    monkeypatch.setattr(calibration.time, "perf_counter", lambda: clock[0])
    medians = calibration._median_step_times([(step("a", 1.0), ()), (step("b", 2.0), ())], 3)
    warm = calibration.CALIBRATION_WARMUP
    assert calls == ["a"] * warm + ["b"] * warm + ["a", "b"] * 3
    k = 2 * warm  # the first timed call's index: a at k, k + 2, k + 4; b one call after each
    assert medians == pytest.approx([1.0 * (1 + 0.1 * (k + 2)), 2.0 * (1 + 0.1 * (k + 3))])
