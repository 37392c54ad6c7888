"""The simulated cluster in the reference device's time: the pace measured inside a budget,
the links dilated by it, the figures converted, and what the records and the table say."""

import subprocess

import pytest

from ralp.bench import pace as pace_module
from ralp.bench import runner
from ralp.bench.launcher import Launcher
from ralp.bench.pace import (
    PACE_TOLERANCE,
    REFERENCE_DEVICE,
    Pace,
    Paces,
    dilated_link,
    dilation_choice,
    held_fields,
    measure_pace,
    reference_time_figures,
)
from ralp.bench.report import BUSY_NOTE, PACE_NOTE, to_table
from ralp.bench.rounds import summarize
from ralp.bench.runner import dilated_launcher, run_all
from ralp.bench.runspec import BenchError, RunSpec
from ralp.units import parse_bandwidth, parse_latency
from tests.bench.records_fixtures import record
from tests.emulation.cgroups import needs_cgroups
from tests.needs import needs_netns


def test_a_dilated_link_is_slower_by_the_factor_and_its_delay_longer():
    assert dilated_link("1gbit", "2ms", 4.0) == ("250mbit", "8ms")
    assert dilated_link("10gbit", None, 0.5) == ("20gbit", None)  # a faster host: faster links
    rate, delay = dilated_link("1gbit", "1ms", 3.0)
    assert parse_bandwidth(rate) == pytest.approx(1e9 / 3, rel=1e-6)
    assert parse_latency(delay) == pytest.approx(3e-3)
    assert dilated_link(None, None, 5.0) == (None, None)


def test_figures_in_reference_time_and_the_hosts_kept_beside():
    r = record(images_per_sec=10.0, images_per_sec_iqr=[9.0, 11.0], step_time_s=2.4,
               step_time_iqr_s=[2.2, 2.6], compute_step_time_s=1.2, wire_step_time_s=2.0,
               bound_step_time_s=2.0, bound_ratio=1.2)
    out = reference_time_figures(r, 2.5)
    assert out["images_per_sec"] == pytest.approx(25.0)  # a dilated step: 2.5 times as long
    assert out["images_per_sec_iqr"] == pytest.approx([22.5, 27.5])
    assert out["step_time_s"] == pytest.approx(0.96)
    assert out["step_time_iqr_s"] == pytest.approx([0.88, 1.04])
    assert out["compute_step_time_s"] == pytest.approx(0.48)
    assert out["wire_step_time_s"] == out["bound_step_time_s"] == pytest.approx(0.8)
    assert "bound_ratio" not in out  # a ratio of two times: the same in either
    assert (out["host_images_per_sec"], out["host_step_time_s"]) == (10.0, 2.4)
    assert reference_time_figures(r, None) == {}


def test_the_dilation_asked_is_checked():
    assert dilation_choice("AUTO") == "auto" and dilation_choice("off") == "off"
    assert dilation_choice("2.5") == 2.5
    for bad in ("0", "-1", "fast", "inf", "nan"):
        with pytest.raises(BenchError, match="--dilation"):
            dilation_choice(bad)


def test_a_given_dilation_measures_nothing_and_off_dilates_nothing():
    run = RunSpec.for_devices("lenet", "ps", 2, image_size=28, num_classes=10)
    said = []
    pace = Paces(3.0, "1gbit", announce=said.append).for_run(run)
    assert (pace.dilation, pace.pace, pace.probe_step_s) == (3.0, None, None)
    assert pace.record_fields("1gbit", None)["applied_bandwidth"] == "333.333333mbit"
    assert Paces("off", "1gbit", announce=said.append).for_run(run) is None
    assert said == []


def test_records_and_the_table_say_the_reference_the_pace_and_the_links():
    pace = Pace(2.0, device_cpus=0.25, probe_step_s=2 * REFERENCE_DEVICE.step_s)
    fields = pace.record_fields("1gbit", "1ms")
    assert fields["reference_device"] == REFERENCE_DEVICE.describe()
    assert fields["device_pace"] == pytest.approx(0.5)
    assert (fields["dilation"], fields["applied_bandwidth"], fields["applied_latency"],
            fields["latency"]) == (2.0, "500mbit", "2ms", "1ms")
    table = to_table([record(bandwidth="1gbit", **{k: v for k, v in fields.items()
                                                    if k != "pace_probe"})])
    first, *rest = table.splitlines()
    assert first.startswith(f"reference device: {REFERENCE_DEVICE.describe()}")
    assert any("@ 1gbit (applied 500mbit, dilation 2, pace 0.5)" in line for line in rest)
    line = pace.line("1gbit", None)
    assert "pace 0.5" in line and "dilation 2" in line and "1gbit -> 500mbit" in line


@needs_cgroups
def test_the_pace_is_measured_inside_one_devices_budget():
    """Half the budget, half the pace: the probe computes inside the device's budget."""
    full, half = (measure_pace(cpus, 4, steps=3) for cpus in ("0.4", "0.2"))
    assert full.device_cpus == 0.4 and half.device_cpus == 0.2
    assert full.pace == pytest.approx(REFERENCE_DEVICE.step_s / full.probe_step_s)
    assert full.dilation == pytest.approx(1 / full.pace)
    assert 1.4 < half.probe_step_s / full.probe_step_s < 3.0
    assert measure_pace("shared", 4) is None  # no budget: no one device's speed


@needs_netns
@pytest.mark.cluster
def test_a_dilated_runs_links_are_shaped_to_the_applied_rate():
    launcher = dilated_launcher(Launcher("netns", bandwidth="1gbit"), 4.0)
    assert launcher.bandwidth == "250mbit"
    with launcher.cluster(1, 1) as handle:
        shaped = subprocess.run(
            ["tc", "-n", handle.cluster.fabric.switch_namespace, "qdisc", "show"],
            capture_output=True, text=True, check=True).stdout
    rates = {line.split(" rate ")[1].split()[0] for line in shaped.splitlines() if " rate " in line}
    assert rates == {"250Mbit"}, shaped


def _probed(pace: float, cpus: float = 0.4) -> Pace:
    """A pace as a probe inside a ``cpus``-CPU budget would give it."""
    return Pace(1 / pace, device_cpus=cpus, probe_step_s=REFERENCE_DEVICE.step_s / pace)


def test_a_pace_holds_within_the_tolerance_and_moves_beyond_it():
    assert PACE_TOLERANCE == 0.15
    held = held_fields(_probed(0.8), _probed(0.8 * 1.14))
    assert held["pace_held"] is True and held["pace_drift"] == pytest.approx(0.14)
    assert held["device_pace_after"] == pytest.approx(0.912)
    assert held_fields(_probed(0.8), _probed(0.8 * 0.84))["pace_held"] is False
    assert held_fields(_probed(0.8), _probed(0.8 * 1.16))["pace_held"] is False
    assert held_fields(Pace(2.0), _probed(0.5)) == {}  # a dilation given by hand: no pace
    assert held_fields(_probed(0.8), None) == {}


def test_each_rounds_records_say_whether_the_pace_held_after_its_runs(monkeypatch):
    """The pace is probed again once per budget after each round's last run, and every
    record of that round (of that budget) carries it; the next round probes afresh."""
    # round 0: 0.4 CPU, 0.2 CPU, both again after; round 1: 0.2, 0.4, both again after
    probes = iter([0.9, 0.88, 0.92, 0.7, 0.8, 0.9, 0.79, 0.91])
    events = []

    def fake_probe(device_cpus, devices, *args, **kwargs):
        events.append(("probe", device_cpus))
        return _probed(next(probes), float(device_cpus))

    def fake_measure(run, launcher, pace, on_progress=None):
        events.append(("run", run.device_cpus))
        return {"mode": run.mode, "device_cpus": run.device_cpus, "images_per_sec": 1.0,
                "step_time_s": 1.0, "dilation": pace.dilation}

    monkeypatch.setattr(pace_module, "measure_pace", fake_probe)
    monkeypatch.setattr(runner, "measure_paced", fake_measure)
    monkeypatch.setattr(runner, "bound_figures", lambda record: {})
    runs = [RunSpec.for_devices("lenet", mode, 2, device_cpus=cpus, image_size=28,
                                num_classes=10) for cpus in ("0.4", "0.2") for mode in ("ps",)]
    said = []
    paces = Paces("auto", "1gbit", announce=said.append)
    records = run_all(runs, Launcher("netns", bandwidth="1gbit"), paces=paces, progress=False,
                      repeat=2)
    assert events == [("probe", "0.4"), ("run", "0.4"), ("probe", "0.2"), ("run", "0.2"),
                      ("probe", "0.4"), ("probe", "0.2"),  # after round 0's runs
                      ("probe", "0.2"), ("run", "0.2"), ("probe", "0.4"), ("run", "0.4"),
                      ("probe", "0.2"), ("probe", "0.4")]
    held = {(r["round"], r["device_cpus"]): r["pace_held"] for r in records}
    assert held == {(0, "0.4"): True, (0, "0.2"): False, (1, "0.2"): True, (1, "0.4"): True}
    moved = next(r for r in records if r["pace_held"] is False)
    assert moved["pace_drift"] == pytest.approx(0.7 / 0.88 - 1)
    assert moved["dilation"] == pytest.approx(1 / 0.88)  # dilated by the pace before its run
    assert sum("after the round's runs" in line for line in said) == 4
    assert sum("moved by more than 15%" in line for line in said) == 1


def test_a_round_whose_pace_moved_is_marked_in_the_table_and_its_summary():
    moved = record(bandwidth="1gbit", device_pace=0.8, dilation=1.25, device_pace_after=0.6,
                   pace_drift=-0.25, pace_held=False)
    table = to_table([moved])
    assert " !" in table and PACE_NOTE in table
    assert "could not keep up" not in table  # the host kept up: only the pace moved
    steady = record(bandwidth="1gbit", device_pace=0.8, dilation=1.25, device_pace_after=0.8,
                    pace_drift=0.0, pace_held=True)
    assert PACE_NOTE not in to_table([steady])
    (summary,) = summarize([{**moved, "round": 0}, {**steady, "round": 1}])
    assert (summary["pace_moved"], summary["flagged"]) == (1, 0)
    assert PACE_NOTE in to_table([summary])


def test_a_failed_probe_after_the_round_loses_no_record(monkeypatch):
    """The probe after the round is a check: where it fails, every record still reaches the
    caller (the last one too), unmarked, and the bench says why."""
    from ralp.cluster.fresh_process import ChildError

    probes = iter([0.9])

    def fake_probe(device_cpus, devices, *args, **kwargs):
        for pace in probes:
            return _probed(pace, float(device_cpus))
        raise ChildError("the probe's process failed")

    monkeypatch.setattr(pace_module, "measure_pace", fake_probe)
    monkeypatch.setattr(runner, "measure_paced", lambda run, launcher, pace, on_progress=None:
                        {"mode": run.mode, "images_per_sec": 1.0, "step_time_s": 1.0})
    monkeypatch.setattr(runner, "bound_figures", lambda record: {})
    runs = [RunSpec.for_devices("lenet", mode, 2, device_cpus="0.4", image_size=28,
                                num_classes=10) for mode in ("ps", "ralp-n")]
    said, got = [], []
    records = run_all(runs, Launcher("netns", bandwidth="1gbit"),
                      paces=Paces("auto", "1gbit", announce=said.append), progress=False,
                      on_record=got.append)
    assert got == records and [r["mode"] for r in got] == ["ps", "ralp-n"]
    assert all("pace_held" not in r for r in got)
    assert any("could not probe the pace again" in line and "failed" in line for line in said)


def test_a_run_beside_other_work_is_marked_in_the_table_and_its_summary():
    busy = record(cpu={"busy_beside": True, "kept_up": True, "unbudgeted_cpus": 0.85})
    table = to_table([busy])
    assert " !" in table and BUSY_NOTE in table and PACE_NOTE not in table
    quiet = record(cpu={"busy_beside": False, "kept_up": True, "unbudgeted_cpus": 0.1})
    assert " !" not in to_table([quiet]) and BUSY_NOTE not in to_table([quiet])
    (summary,) = summarize([{**quiet, "round": 0}, {**busy, "round": 1}])
    assert summary["busy_beside"] == 1 and BUSY_NOTE in to_table([summary])
