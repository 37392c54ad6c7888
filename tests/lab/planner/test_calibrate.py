"""The lab's calibration command for the bench (``RALP_BENCH_CALIBRATION``): the rings'
overlaps (a budget's, not a model's) probed once per budget and lent to its later workloads;
gRPC's CPU measured at the fabric's rate on budgeted devices."""

import json

from lab.planner.calibrate import bench_command
from ralp.bench.runspec import RunSpec


def _run(model: str, devices: int = 4, cpus: str = "auto") -> RunSpec:
    return RunSpec.for_devices(model, "ps", devices, image_size=28 if model == "lenet" else 75,
                               batch_size=8, num_classes=10, device_cpus=cpus)


def test_the_first_earlier_calibration_with_overlaps_lends_them(tmp_path):
    out = str(tmp_path / "out.json")
    plain = bench_command(_run("lenet"), out, 10, [], None)
    assert "--overlap-from" not in plain and plain[plain.index("--device-cpus") + 1] == "auto"
    assert plain[2] == "lab.planner.calibrate"
    none = {"id": "a", "host": {"ring_overlap": None, "ring_overlaps": []}}
    some = {"id": "b", "host": {"ring_overlap": 0.5}}
    reused = bench_command(_run("lenet"), out, 10, [none, some], None)
    lent = reused[reused.index("--overlap-from") + 1]
    with open(lent) as f:
        assert json.load(f)["id"] == "b"
    assert "--overlap-from" not in bench_command(_run("lenet"), out, 10, [none], None)
    shared = bench_command(_run("lenet", cpus="shared"), out, 10, [some], None)
    assert "--shared-host" in shared and "--device-cpus" not in shared
    assert "--overlap-from" not in shared


def test_budgeted_devices_on_the_fabric_measure_grpc_at_its_rate(tmp_path):
    out = str(tmp_path / "out.json")
    budgeted = bench_command(_run("lenet"), out, 10, [], "500mbit")
    assert budgeted[budgeted.index("--transfer-rates") + 1] == "500mbit"
    shared = bench_command(_run("lenet", cpus="shared"), out, 10, [], "1gbit")
    assert "--transfer-rates" not in shared
    assert "--transfer-rates" not in bench_command(_run("lenet"), out, 10, [], None)
