"""``python -m lab.planner``: validation output, the simulated cluster's recommendation, the
calibration's probes' options, and bad input (exit 2)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.planner.cli import run
from lab.planner.host import Host
from lab.planner.host_calibration import HostCalibration, HostEntry
from ralp.planner.modes import PlannerError

pytestmark = pytest.mark.slow  # every test runs the CLI in a fresh interpreter (TensorFlow's import each)

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data"  # golden records and calibrations, copied from runs
SWEEP = DATA / "bench_sweep_1gbit.json"


@pytest.fixture
def calibration(tmp_path):
    path = tmp_path / "cal.json"
    entries = [HostEntry("alexnet", 8, 75, 1000, "pool5", 0.05, 0.01, 5)]
    HostCalibration(Host(True, 1e-9, 1e-4), entries, "test").save(path)
    return path


@pytest.fixture
def results(tmp_path):
    records = [r for r in json.loads(SWEEP.read_text()) if r["model"] == "alexnet"]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(records))
    return path, records


def test_validate_json_has_every_record_and_the_errors(calibration, results, capsys):
    path, records = results
    assert run(["--validate", str(path), "--compute-profile", str(calibration),
                "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["records"]) == len(records)
    for row, rec in zip(out["records"], records, strict=True):
        assert (row["model"], row["mode"], row["devices"], row["bandwidth"]) == (
            rec["model"], rec["mode"], rec["devices"], rec["bandwidth"])
        assert row["measured_images_per_sec"] == rec["images_per_sec"]
        assert row["predicted_images_per_sec"] > 0
    errs = sorted(abs(r["predicted_images_per_sec"] / r["measured_images_per_sec"] - 1)
                  for r in out["records"])
    assert out["max_abs_error"] == pytest.approx(errs[-1])
    assert out["median_abs_error"] == pytest.approx((errs[2] + errs[3]) / 2)


def test_recommendation_lists_every_mode_and_the_best(calibration, capsys, tmp_path):
    png = tmp_path / "plan.png"
    assert run(["--model", "alexnet", "--batch-size", "8", "--image-size", "75",
                "--devices", "3", "4", "--bandwidth", "1gbit", "10gbit", "--shared-host",
                "--compute-profile", str(calibration), "--format", "json",
                "--plot", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    modes = {(p["devices"], p["mode"]) for p in out["predictions"]}
    assert (3, "ps") not in modes  # plain PS needs an even N
    assert {(4, m) for m in ("ps", "ralp-h", "ralp-n", "horovod")} <= modes
    assert len(out["best"]) == 4  # one per (bandwidth, devices)
    for best in out["best"]:
        same = [p for p in out["predictions"] if (p["devices"], p["bandwidth_bits"]) ==
                (best["devices"], best["bandwidth_bits"])]
        assert best["images_per_sec"] == max(p["images_per_sec"] for p in same)
    assert out["skewness_verdict"].startswith("eligible")
    assert png.stat().st_size > 0


@pytest.mark.parametrize("argv, message", [
    (["--validate", str(SWEEP)], "needs --compute-profile"),
    (["--calibrate", "--model", "vgg11", "--shared-host"], "needs --output"),
])
def test_bad_input_exits_2_without_a_traceback(argv, message):
    done = subprocess.run([sys.executable, "-m", "lab.planner", *argv], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_record_without_calibration_is_named(results, tmp_path, capsys):
    path, _ = results
    empty = tmp_path / "empty.json"
    HostCalibration(Host(True), [], "test").save(empty)
    assert run(["--validate", str(path), "--compute-profile", str(empty)]) == 2
    assert "no calibration for alexnet at batch 8" in capsys.readouterr().err


def test_fit_half_reports_only_the_held_out_records(calibration, results, capsys):
    path, records = results
    assert run(["--validate", str(path), "--compute-profile", str(calibration),
                "--fit-half", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    held_out = records[1::2]
    assert [(r["mode"], r["devices"]) for r in out["records"]] == [
        (r["mode"], r["devices"]) for r in held_out]
    assert out["fit_half"]["count"] == len(records) - len(held_out)
    assert 0.5 <= out["capacity"] <= 4.0


def test_a_record_carrying_its_calibration_is_predicted_from_it(calibration, results, tmp_path,
                                                                capsys):
    path, records = results
    # the calibration taken beside the run (python -m ralp.bench --calibrate): 3x slower
    # compute than the profile's, kept in the first record only
    beside = HostCalibration(Host(True, 2e-9, 1e-4), [HostEntry("alexnet", 8, 75, 1000, "pool5", 0.15,
                                                        0.03, 5, capacity=1.2)], "beside")
    own = [{**records[0], "calibration": {**beside.to_dict(), "measured_at": 1.0}}, *records[1:]]
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps(own))
    beside_file = tmp_path / "beside.json"
    beside.save(beside_file)
    assert run(["--validate", str(mixed), "--compute-profile", str(calibration),
                "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    # the reference: the same records predicted with each calibration given as the profile
    for profile, rows in ((beside_file, got["records"][:1]), (calibration, got["records"][1:])):
        assert run(["--validate", str(path), "--compute-profile", str(profile),
                    "--format", "json"]) == 0
        alone = json.loads(capsys.readouterr().out)["records"]
        expected = alone[:1] if profile == beside_file else alone[1:]
        assert [r["predicted_images_per_sec"] for r in rows] == pytest.approx(
            [r["predicted_images_per_sec"] for r in expected])
    assert [r["own_calibration"] for r in got["records"]] == [True] + [False] * (len(records) - 1)
    assert got["own_calibrations"] == 1
    # every record carrying one: no profile needed; one without: named
    only = tmp_path / "only.json"
    only.write_text(json.dumps(own[:1]))
    assert run(["--validate", str(only)]) == 0
    assert "predicted from the calibration taken beside the run" in capsys.readouterr().out
    assert run(["--validate", str(mixed)]) == 2
    assert f"{len(records) - 1} of the {len(records)} records carry no" in capsys.readouterr().err


def test_a_fitted_capacity_replaces_the_measured_ones_at_every_process_count(results):
    from lab.planner import validate
    from ralp.planner.cli import zoo_workload

    _, records = results
    base = HostEntry("alexnet", 8, 75, 1000, "pool5", 0.15, 0.03, 5, capacity=1.2)
    counted = HostEntry("alexnet", 8, 75, 1000, "pool5", 0.15, 0.03, 5, capacity=1.2,
                    capacities=[[2, 1.2], [4, 0.7]])
    host = Host(True, 2e-9, 1e-4, cores=2)

    def carrying(entry):
        cal = HostCalibration(host, [entry], "beside").to_dict()
        return [("r.json", {**r, "calibration": cal}) for r in records]

    fitted = [validate.predict_records(carrying(e), None, zoo_workload, capacity=1.5)
              for e in (base, counted)]
    assert [r.predicted_images_per_sec for r in fitted[0]] == pytest.approx(
        [r.predicted_images_per_sec for r in fitted[1]])
    measured = validate.predict_records(carrying(counted), None, zoo_workload)
    assert [r.predicted_images_per_sec for r in measured] != pytest.approx(
        [r.predicted_images_per_sec for r in fitted[1]])


def test_overlaps_from_a_later_calibration_slow_only_the_rings(tmp_path, capsys):
    zoo = json.loads((DATA / "devices_zoo_1gbit.json").read_text())
    records = tmp_path / "alexnet.json"
    records.write_text(json.dumps([r for r in zoo if r["model"] == "alexnet"]))
    later = tmp_path / "later.json"
    nothing_hidden = ((1.0, 0.0),)  # a curve: it serves even where a record has a figure
    HostCalibration(Host(False, ring_overlaps=nothing_hidden, collective_overlaps=nothing_hidden),
                [], "later").save(later)
    predicted = []
    for extra in ([], ["--overlap-from", str(later)]):
        assert run(["--validate", str(records), "--format", "json", *extra]) == 0
        report = json.loads(capsys.readouterr().out)
        predicted.append({s["mode"]: s["predicted"] for s in report["settings"]})
    full, none = predicted
    assert none["ps"] == full["ps"] and none["ralp-n"] == full["ralp-n"]
    # nothing of the rings' CPU hidden: Horovod's and Stanza's steps take longer
    assert none["horovod"] < full["horovod"] and none["stanza"] < full["stanza"]


def test_overlap_ratios_need_budgeted_devices_and_positive_ratios(tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert run(["--calibrate", "--model", "lenet", "--overlap-ratios", "1", "3", "--output",
                str(out)]) == 2
    assert "--device-cpus" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        run(["--calibrate", "--model", "lenet", "--device-cpus", "auto", "--overlap-ratios",
             "0", "--output", str(out)])
    assert refused.value.code == 2 and "positive number" in capsys.readouterr().err
    lent = tmp_path / "lent.json"
    HostCalibration(Host(False, device_cpus=0.425, ring_overlap=0.5), [], "lent").save(lent)
    assert run(["--calibrate", "--model", "lenet", "--device-cpus", "auto", "--overlap-from",
                str(lent), "--overlap-ratios", "1", "3", "--output", str(out)]) == 2
    assert "give one of them" in capsys.readouterr().err
    assert not out.exists()


def test_transfer_rates_need_budgeted_devices_and_rates(tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert run(["--calibrate", "--model", "lenet", "--transfer-rates", "1gbit", "--output",
                str(out)]) == 2
    assert "--device-cpus" in capsys.readouterr().err
    assert run(["--calibrate", "--model", "lenet", "--device-cpus", "auto", "--transfer-rates",
                "fast", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--transfer-rates" in err and "'1gbit'" in err and "Traceback" not in err
    assert not out.exists()


def test_overlaps_for_a_calibration_need_a_zoo_model_on_budgeted_devices(tmp_path, capsys):
    later = tmp_path / "later.json"
    HostCalibration(Host(False, ring_overlaps=((1.0, 0.5),)), [], "later").save(later)
    assert run(["--calibrate", "--model", "lenet", "--overlap-from", str(later), "--output",
                str(tmp_path / "cal.json")]) == 2
    assert "--device-cpus" in capsys.readouterr().err
    assert not (tmp_path / "cal.json").exists()


def test_a_record_run_on_a_shape_given_by_hand_is_predicted_on_that_shape():
    # bench --workers 3 --ps 1 --modes ps: plain PS on one PS task, not the mode's 2 + 2
    from lab.planner import validate
    from lab.planner.predict import predict, predict_on
    from ralp.planner.cli import zoo_workload

    zoo = json.loads((DATA / "devices_zoo_1gbit_one_ps.json").read_text())
    record = next(r for r in zoo if r["model"] == "alexnet" and r["mode"] == "ps")
    assert (record["workers"], record["ps"]) == (3, 1)
    cal = validate.own_calibration(record)
    entry = cal.find("alexnet", 8, 75, 1000)
    work, host = zoo_workload("alexnet", 8, 75, 1000), entry.host_for(cal.host)
    on_shape = predict_on(work, entry.compute, host, "ps", 3, 1, 10**9).images_per_sec
    by_rule = predict(work, entry.compute, host, "ps", 4, 10**9).images_per_sec
    assert validate.predict_record(record, None, zoo_workload) == pytest.approx(on_shape)
    assert on_shape != pytest.approx(by_rule)  # 3 workers on one PS link, not 2 on two


def test_a_dilated_record_is_predicted_on_its_applied_link_in_the_reference_time():
    # bench --dilation: the host's calibration, links slowed by the dilation, images/s in the
    # reference device's time (dilation times the host's)
    from lab.planner import validate
    from lab.planner.predict import predict_on
    from ralp.planner.cli import zoo_workload

    zoo = json.loads((DATA / "devices_zoo_1gbit_one_ps.json").read_text())
    record = next(r for r in zoo if r["model"] == "alexnet" and r["mode"] == "ps")
    dilated = {**record, "dilation": 2.0, "applied_bandwidth": "500mbit",
               "images_per_sec": 2 * record["images_per_sec"]}
    cal = validate.own_calibration(record)
    entry = cal.find("alexnet", 8, 75, 1000)
    host_time = predict_on(zoo_workload("alexnet", 8, 75, 1000), entry.compute,
                           entry.host_for(cal.host), "ps", 3, 1, 5 * 10**8).images_per_sec
    assert validate.predict_record(dilated, None, zoo_workload) == pytest.approx(2 * host_time)
    [row] = validate.predict_records([("", dilated)], None, zoo_workload)
    assert row.measured_images_per_sec == dilated["images_per_sec"]
    assert row.bandwidth == "1gbit"  # the setting: the nominal link


def test_a_setting_calibrated_every_round_is_predicted_from_each_rounds_own(tmp_path, capsys):
    import statistics

    from lab.planner import validate
    from ralp.planner.cli import zoo_workload

    zoo = json.loads((DATA / "devices_zoo_n4_1gbit_in_epoch.json").read_text())
    rounds = [r for r in zoo if r["model"] == "alexnet" and r["mode"] == "ralp-h"]
    records = tmp_path / "alexnet.json"
    records.write_text(json.dumps(rounds))
    assert run(["--validate", str(records), "--format", "json"]) == 0
    [setting] = json.loads(capsys.readouterr().out)["settings"]
    each = [validate.predict_record(r, None, zoo_workload) for r in rounds]
    assert len({r["calibration"]["measured_at"] for r in rounds}) == 3  # one per round
    assert len(set(each)) == 3  # and they differ
    assert setting["predicted"] == pytest.approx(statistics.median(each))


TURNS = {rate: DATA / f"turns_one_ps_resnet50_{rate}.json"
         for rate in ("500mbit", "750mbit")}
TURNS_CALIBRATION = {"500mbit": TURNS["500mbit"].with_name("turns_one_ps_resnet50_calibration.json"),
                     "750mbit": TURNS["750mbit"].with_name(
                         "turns_one_ps_resnet50_750mbit_calibration.json")}


def test_each_file_of_budgeted_records_can_bring_its_own_calibration(capsys):
    # the reference: each file alone, its calibration as the profile for every record
    alone = {}
    for rate, path in TURNS.items():
        assert run(["--validate", str(path), "--compute-profile", str(TURNS_CALIBRATION[rate]),
                    "--format", "json"]) == 0
        alone[rate] = json.loads(capsys.readouterr().out)["settings"]
    pairs = [a for rate in TURNS for a in ("--compute-profile-for",
                                           f"{TURNS[rate]}={TURNS_CALIBRATION[rate]}")]
    assert run(["--validate", *map(str, TURNS.values()), *pairs, "--format", "json"]) == 0
    both = json.loads(capsys.readouterr().out)["settings"]
    expected = alone["500mbit"] + alone["750mbit"]
    assert [(s["mode"], s["devices"], s["bandwidth"]) for s in both] == [
        (s["mode"], s["devices"], s["bandwidth"]) for s in expected]
    assert [s["predicted"] for s in both] == pytest.approx([s["predicted"] for s in expected])
    # the two calibrations differ, so one for both would not do
    assert run(["--validate", *map(str, TURNS.values()), "--compute-profile",
                str(TURNS_CALIBRATION["500mbit"]), "--format", "json"]) == 0
    one = json.loads(capsys.readouterr().out)["settings"]
    assert [s["predicted"] for s in one] != pytest.approx([s["predicted"] for s in expected])


@pytest.mark.parametrize("extra, message", [
    (["--compute-profile-for", "elsewhere.json=cal.json"], "is not a file of --validate"),
    (["--compute-profile-for", "turns_one_ps_resnet50_750mbit.json"], "takes RECORDS=FILE"),
    ([], "or --compute-profile-for RECORDS=FILE"),
])
def test_a_calibration_for_a_file_not_given_or_none_is_refused(extra, message, capsys):
    assert run(["--validate", str(TURNS["750mbit"]), *extra]) == 2
    assert message in capsys.readouterr().err


def test_one_setting_in_two_files_is_refused_not_mixed(tmp_path, capsys):
    copy = tmp_path / "again.json"
    copy.write_text(TURNS["750mbit"].read_text())
    assert run(["--validate", str(TURNS["750mbit"]), str(copy), "--compute-profile",
                str(TURNS_CALIBRATION["750mbit"])]) == 2
    assert "validate each run's file apart" in capsys.readouterr().err


def test_a_calibration_for_a_name_two_files_share_is_refused(tmp_path, capsys):
    # records know their file by name alone: the pair could not say which file it meant
    other = tmp_path / TURNS["750mbit"].name
    other.write_text(TURNS["500mbit"].read_text())
    assert run(["--validate", str(TURNS["750mbit"]), str(other), "--compute-profile-for",
                f"{other}={TURNS_CALIBRATION['500mbit']}"]) == 2
    assert "2 files of --validate are named turns_one_ps" in capsys.readouterr().err


def test_a_record_calibrated_for_compute_only_takes_the_lent_host_or_is_refused():
    # the bench's default calibration (the product's) measures a device's compute, none of
    # the host's byte or ring terms: predicted on it alone, a ring's CPU would cost nothing
    from lab.planner import validate
    from lab.planner.predict import predict_on
    from ralp.planner.cli import zoo_workload

    zoo = json.loads((DATA / "devices_zoo_1gbit.json").read_text())
    record = next(r for r in zoo if r["model"] == "alexnet" and r["mode"] == "horovod")
    cal = validate.own_calibration(record)
    lent = cal.host
    compute_only = HostCalibration(Host(False), cal.entries).to_dict()
    product = {**record, "calibration": compute_only}
    assert validate.compute_only(validate.own_calibration(product).host)
    with pytest.raises(PlannerError, match="--overlap-from"):
        validate.predict_record(product, None, zoo_workload)
    entry = cal.find("alexnet", 8, 75, 1000)
    expected = predict_on(zoo_workload("alexnet", 8, 75, 1000), entry.compute, lent,
                          "horovod", 4, 0, 10**9).images_per_sec
    assert validate.predict_record(product, None, zoo_workload, lent) == pytest.approx(expected)
    bare = predict_on(zoo_workload("alexnet", 8, 75, 1000), entry.compute, Host(False),
                      "horovod", 4, 0, 10**9).images_per_sec
    assert bare > 1.05 * expected  # what it was predicted on before: no transfer costs CPU
