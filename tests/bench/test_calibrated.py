"""``--calibrate``'s bookkeeping: one calibration per workload and round, and the rings'
overlaps (a budget's, not a model's) probed once per budget and handed to its later
workloads."""

from ralp.bench import calibrated
from ralp.bench.calibrated import Calibrations, calibration_command
from ralp.bench.runspec import RunSpec


def _run(model: str, devices: int = 4, cpus: str = "auto") -> RunSpec:
    return RunSpec.for_devices(model, "ps", devices, image_size=28 if model == "lenet" else 75,
                               batch_size=8, num_classes=10, device_cpus=cpus)


def test_the_command_takes_an_earlier_calibration_s_overlaps_when_given():
    plain = calibration_command(_run("lenet"), "out.json")
    assert "--overlap-from" not in plain and plain[plain.index("--device-cpus") + 1] == "auto"
    reused = calibration_command(_run("lenet"), "out.json", "first.json")
    assert reused[reused.index("--overlap-from") + 1] == "first.json"
    shared = calibration_command(_run("lenet", cpus="shared"), "out.json")
    assert "--shared-host" in shared and "--device-cpus" not in shared


def test_budgeted_devices_on_the_fabric_measure_grpc_at_its_rate():
    budgeted = calibration_command(_run("lenet"), "out.json", transfer_rate="500mbit")
    assert budgeted[budgeted.index("--transfer-rates") + 1] == "500mbit"
    shared = calibration_command(_run("lenet", cpus="shared"), "out.json", transfer_rate="1gbit")
    assert "--transfer-rates" not in shared
    assert "--transfer-rates" not in calibration_command(_run("lenet"), "out.json")


def test_a_budget_s_first_calibration_lends_its_overlaps_to_the_later_workloads(monkeypatch):
    asked = []

    def calibrate_workload(run, overlaps=None, transfer_rate=None):
        asked.append((run.model, run.devices, run.device_cpus, overlaps and overlaps["id"]))
        host = {} if run.device_cpus == "shared" else {"ring_overlap": 0.5}
        return {"id": f"{run.model}/{run.devices}/{run.device_cpus}", "host": host}

    monkeypatch.setattr(calibrated, "calibrate_workload", calibrate_workload)
    taken = Calibrations(announce=lambda _: None)
    for run in (_run("lenet"), _run("lenet"), _run("alexnet"), _run("alexnet", devices=8),
                _run("vgg11"), _run("lenet", cpus="shared"), _run("alexnet", cpus="shared")):
        taken.for_run(run)
    assert asked == [
        ("lenet", 4, "auto", None),  # probed: the first of its budget
        ("alexnet", 4, "auto", "lenet/4/auto"),  # the same budget: lenet's overlaps
        ("alexnet", 8, "auto", None),  # another budget: probed again
        ("vgg11", 4, "auto", "lenet/4/auto"),
        ("lenet", 4, "shared", None),  # shared CPUs have no overlaps to lend
        ("alexnet", 4, "shared", None),
    ]


def test_a_calibration_without_overlaps_lends_none(monkeypatch):
    asked = []

    def calibrate_workload(run, overlaps=None, transfer_rate=None):
        asked.append(overlaps)
        # no Horovod, no namespaces: none measured
        return {"host": {"ring_overlap": None, "ring_overlaps": []}}

    monkeypatch.setattr(calibrated, "calibrate_workload", calibrate_workload)
    taken = Calibrations(announce=lambda _: None)
    taken.for_run(_run("lenet"))
    taken.for_run(_run("alexnet"))
    assert asked == [None, None]


def test_each_round_calibrates_its_workloads_again_and_still_borrows_the_overlaps(monkeypatch):
    asked = []

    def calibrate_workload(run, overlaps=None, transfer_rate=None):
        asked.append((run.model, overlaps and overlaps["id"]))
        return {"id": f"{run.model} #{len(asked)}", "host": {"ring_overlap": 0.5}}

    monkeypatch.setattr(calibrated, "calibrate_workload", calibrate_workload)
    taken = Calibrations(announce=lambda _: None)
    got = [taken.for_run(_run(model), round_index)["id"]
           for round_index, model in ((0, "lenet"), (0, "alexnet"), (0, "lenet"),
                                      (1, "alexnet"), (1, "lenet"), (1, "alexnet"))]
    # one calibration per workload and round, beside that round's runs
    assert got == ["lenet #1", "alexnet #2", "lenet #1", "alexnet #3", "lenet #4", "alexnet #3"]
    # the budget's rings were probed once, by the first calibration
    assert asked == [("lenet", None), ("alexnet", "lenet #1"), ("alexnet", "lenet #1"),
                     ("lenet", "lenet #1")]


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

    import pytest

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
