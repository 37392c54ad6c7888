"""The bench's calibrations: one per workload (per workload and round where the maker asks
each round), by the product's command or one ``$RALP_BENCH_CALIBRATION`` names, each given
the budget's earlier ones."""

import pytest

from ralp.bench import calibrated
from ralp.bench.calibrated import Calibrations, calibration_command
from ralp.bench.runspec import RunSpec
from ralp.errors import RalpError


def _run(model: str, devices: int = 4, cpus: str = "auto") -> RunSpec:
    return RunSpec.for_devices(model, "ps", devices, image_size=28 if model == "lenet" else 75,
                               batch_size=8, num_classes=10, device_cpus=cpus)


def test_the_command_measures_one_devices_compute_in_its_budget():
    budgeted = calibration_command(_run("lenet"), "out.json", 10, [], "500mbit")
    assert budgeted[budgeted.index("--device-cpus") + 1] == "auto"
    assert budgeted[budgeted.index("--steps") + 1] == "10"
    assert budgeted[2] == "ralp.planner.calibrate_cli" and "--transfer-rates" not in budgeted
    shared = calibration_command(_run("lenet", cpus="shared"), "out.json", 10, [], None)
    assert "--device-cpus" not in shared


def test_another_command_maker_is_named_by_the_variable(monkeypatch):
    monkeypatch.delenv(calibrated.CALIBRATION_ENV, raising=False)
    assert calibrated.command_maker() is calibration_command
    monkeypatch.setenv(calibrated.CALIBRATION_ENV, "lab.planner.calibrate:bench_command")
    from lab.planner.calibrate import bench_command

    assert calibrated.command_maker() is bench_command
    monkeypatch.setenv(calibrated.CALIBRATION_ENV, "no.such.module:maker")
    with pytest.raises(RalpError, match="no calibration command there"):
        calibrated.command_maker()


def test_each_budget_s_earlier_calibrations_go_to_its_later_workloads(monkeypatch):
    asked = []

    def calibrate_workload(run, earlier=(), transfer_rate=None):
        asked.append((run.model, run.devices, run.device_cpus, [c["id"] for c in earlier]))
        return {"id": f"{run.model}/{run.devices}/{run.device_cpus}"}

    monkeypatch.setattr(calibrated, "calibrate_workload", calibrate_workload)
    taken = Calibrations(announce=lambda _: None)
    for run in (_run("lenet"), _run("lenet"), _run("alexnet"), _run("alexnet", devices=8),
                _run("lenet", cpus="shared"), _run("alexnet", cpus="shared")):
        taken.for_run(run)
    assert asked == [
        ("lenet", 4, "auto", []),  # the first of its budget
        ("alexnet", 4, "auto", ["lenet/4/auto"]),  # the same budget: lenet's before it
        ("alexnet", 8, "auto", []),  # another budget
        ("lenet", 4, "shared", []),
        ("alexnet", 4, "shared", ["lenet/4/shared"]),
    ]


@pytest.mark.parametrize("dilation, rate", [(None, "1gbit"), (2.0, "500mbit"), (0.5, "2gbit")])
def test_a_dilated_run_s_fabric_rate_is_the_one_its_links_are_shaped_at(monkeypatch, dilation,
                                                                        rate):
    asked = []

    def calibrate_workload(run, earlier=(), transfer_rate=None):
        asked.append(transfer_rate)
        return {}

    monkeypatch.setattr(calibrated, "calibrate_workload", calibrate_workload)
    Calibrations(announce=lambda _: None, transfer_rate="1gbit").for_run(_run("lenet"), 0,
                                                                          dilation)
    assert asked == [rate]


def _asked_in_rounds(monkeypatch) -> list[str]:
    asked = []

    def calibrate_workload(run, earlier=(), transfer_rate=None):
        asked.append(run.model)
        return {"id": f"{run.model} #{len(asked)}"}

    monkeypatch.setattr(calibrated, "calibrate_workload", calibrate_workload)
    taken = Calibrations(announce=lambda _: None)
    return [taken.for_run(_run(model), round_index)["id"]
            for round_index, model in ((0, "lenet"), (0, "alexnet"), (0, "lenet"),
                                       (1, "alexnet"), (1, "lenet"), (1, "alexnet"))]


def test_each_workload_is_calibrated_once_per_bench(monkeypatch):
    monkeypatch.delenv(calibrated.CALIBRATION_ENV, raising=False)
    got = _asked_in_rounds(monkeypatch)
    assert got == ["lenet #1", "alexnet #2", "lenet #1", "alexnet #2", "lenet #1", "alexnet #2"]


def test_a_maker_that_asks_each_round_calibrates_each_rounds_workloads_again(monkeypatch):
    monkeypatch.setenv(calibrated.CALIBRATION_ENV,
                       "lab.planner.calibrate:product_command_each_round")
    got = _asked_in_rounds(monkeypatch)
    # one calibration per workload and round, beside that round's runs
    assert got == ["lenet #1", "alexnet #2", "lenet #1", "alexnet #3", "lenet #4", "alexnet #3"]


STOPPABLE = """
import signal, sys, time
def stop(*_):
    open(sys.argv[1], "w").write("cleaned up")
    sys.exit(130)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1], "w").write("started")
time.sleep(60)
"""


def test_an_interrupted_bench_stops_its_calibration_as_ctrl_c_would(tmp_path):
    """SIGTERM first (the calibration removes its devices' groups and processes), not a kill."""
    import signal
    import sys
    import time

    said = tmp_path / "said"

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 3.0)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            calibrated._run_calibration([sys.executable, "-c", STOPPABLE, str(said)], "lenet")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert said.read_text() == "cleaned up"
    assert time.monotonic() - started < 20
