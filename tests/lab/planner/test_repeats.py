"""The planner against repeated budgeted runs, on scripted records: medians, noise bands,
speedups, Kendall's tau and auto's pick."""

import pytest

from lab.planner.repeats import (
    auto_pick,
    budgeted,
    flagged,
    settings_of,
    to_text,
    validate,
)

BUDGET = {"budget_cpus": 0.425, "fallback": None}


def _record(mode: str, round_: int, rate: float, **extra) -> dict:
    return {"model": "alexnet", "devices": 4, "bandwidth": "1gbit", "batch_size": 8,
            "image_size": 75, "num_classes": 1000, "device_cpus": "auto", "mode": mode,
            "round": round_, "images_per_sec": rate, "error": None, "cpu": BUDGET, **extra}


# three rounds; round 1's machine was slow for everyone
MEASURED = {"ps": (10.0, 8.0, 11.0), "ralp-n": (40.0, 30.0, 44.0), "horovod": (20.0, 17.0, 22.0)}


def _records():
    return [_record(mode, k, rates[k]) for k in range(3) for mode, rates in MEASURED.items()]


def test_only_budgeted_successful_records_make_settings():
    shared = _record("ps", 0, 9.0, device_cpus="shared", cpu={"budget_cpus": None})
    fallen = _record("ps", 0, 9.0, cpu={"budget_cpus": None, "fallback": "no cgroups"})
    failed = _record("ps", 0, None, error="boom")
    assert not budgeted(shared) and not budgeted(fallen)
    groups = settings_of([*_records(), shared, fallen, failed])
    (modes,) = groups.values()
    assert sorted(modes) == ["horovod", "ps", "ralp-n"]
    assert modes["ralp-n"].median == 40.0 and modes["ralp-n"].band == (30.0, 44.0)


def test_rounds_the_host_could_not_keep_up_with_are_left_out_and_said():
    slow = _record("ralp-n", 3, 5.0, host_kept_up=False)
    kept = _record("ralp-n", 4, 41.0, host_kept_up=True)
    assert flagged(slow) and not flagged(kept) and not flagged(_records()[0])
    modes = next(iter(settings_of([*_records(), slow, kept]).values()))
    assert sorted(modes["ralp-n"].rounds) == [0, 1, 2, 4]  # round 3 is not a device's run
    report = validate(settings_of(_records()), lambda s: 10.0)
    assert "left out" not in to_text(report)
    report["excluded_flagged"] = 1
    assert "left out: 1 records the host could not keep up with" in to_text(report)


def test_a_prediction_inside_the_band_is_exact_and_outside_is_against_the_median():
    predicted = {"ps": 10.5, "ralp-n": 50.0, "horovod": 15.0}
    report = validate(settings_of(_records()), lambda s: predicted[s.mode])
    errors = {r["mode"]: r["error"] for r in report["settings"]}
    assert errors["ps"] == 0.0  # 10.5 in [8, 11]
    assert errors["ralp-n"] == pytest.approx(50 / 40 - 1)
    assert errors["horovod"] == pytest.approx(15 / 20 - 1)
    assert report["errors"]["overall"]["max_abs_error"] == pytest.approx(0.25)
    assert report["errors"]["inside_band"] == 1
    assert report["errors"]["ralp-n"]["count"] == 1


def test_the_speedup_error_is_against_the_median_of_the_per_round_speedups():
    # per-round ralp-n/ps: 4.0, 3.75, 4.0 -> median 4.0, band [3.75, 4.0]
    predicted = {"ps": 10.0, "ralp-n": 45.0, "horovod": 19.0}  # 4.5x and 1.9x
    report = validate(settings_of(_records()), lambda s: predicted[s.mode])
    by_mode = {r["mode"]: r["speedup_error"] for r in report["settings"]}
    assert by_mode["ps"] is None
    assert by_mode["ralp-n"] == pytest.approx(4.5 / 4.0 - 1)
    # horovod's per-round speedups 2.0, 2.125, 2.0: 1.9 lies below their band
    assert by_mode["horovod"] == pytest.approx(1.9 / 2.0 - 1)
    assert report["speedup"]["count"] == 2
    inside = {"ps": 10.0, "ralp-n": 39.0, "horovod": 20.5}  # 3.9x and 2.05x: in the bands
    report = validate(settings_of(_records()), lambda s: inside[s.mode])
    assert report["speedup"]["max_abs_error"] == 0.0


def test_kendall_tau_and_auto_pick():
    right = {"ps": 10.0, "ralp-n": 40.0, "horovod": 20.0}
    report = validate(settings_of(_records()), lambda s: right[s.mode])
    assert report["kendall_tau_median"] == pytest.approx(1.0)
    (pick,) = report["auto"]
    assert (pick["chosen"], pick["best"], pick["chosen_over_best"]) == ("ralp-n", "ralp-n", 1.0)
    wrong = {"ps": 50.0, "ralp-n": 40.0, "horovod": 20.0}  # ranks ps first
    report = validate(settings_of(_records()), lambda s: wrong[s.mode])
    (pick,) = report["auto"]
    assert pick["chosen"] == "ps" and pick["chosen_over_best"] == pytest.approx(10 / 40)
    assert report["kendall_tau_median"] < 1.0
    assert "auto: within 0.95x of the best measured mode in 0 of 1" in to_text(report)


def test_two_best_modes_whose_bands_overlap_both_count_as_best():
    groups = settings_of([_record("ralp-n", k, r) for k, r in enumerate((40.0, 30.0, 44.0))]
                         + [_record("stanza", k, r) for k, r in enumerate((38.0, 36.0, 41.0))])
    modes = next(iter(groups.values()))
    modes["ralp-n"].predicted, modes["stanza"].predicted = 30.0, 35.0  # picks stanza
    pick = auto_pick(modes)
    assert pick["chosen"] == "stanza" and pick["best"] == "ralp-n"
    assert pick["chosen_over_best"] == 1.0 and pick["best_within_noise"] == ["ralp-n", "stanza"]


def test_two_runs_of_one_setting_are_not_mixed_into_one_band():
    # the same setting in two files (two days, say): round 0 twice
    again = [_record("ps", 0, 30.0)]
    with pytest.raises(ValueError, match="validate each run's file apart"):
        settings_of([*_records(), *again])
