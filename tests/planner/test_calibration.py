"""Calibration JSON (versioned, migrated on load) and the measurement of a model's head and
tail (in one process)."""

import json

import pytest

from ralp.planner.calibration import SCHEMA_VERSION, Calibration, Entry, migrate
from ralp.planner.modes import PlannerError


def entry(model="vgg11", full=1.0, tail=0.2):
    return Entry(model, 8, 75, 1000, "pool5", full, tail, 5)


def test_round_trip_and_lookup(tmp_path):
    cal = Calibration([entry()], "here")
    cal.add(entry(full=2.0))  # replaces the entry with the same key
    path = tmp_path / "cal.json"
    cal.save(path)
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION
    back = Calibration.load(path)
    assert back == cal
    assert back.find("vgg11", 8, 75, 1000).compute.full_s == 2.0
    assert back.find("vgg11", 8, 75, 1000).compute.head_s == pytest.approx(1.8)


def test_a_missing_entry_says_how_to_measure_it():
    with pytest.raises(PlannerError, match="--calibrate --model alexnet --batch-size 8"):
        Calibration([entry()]).find("alexnet", 8, 75, 1000)


@pytest.mark.parametrize("data, says", [
    ({"format": 99}, "schema version 99"),
    ({"schema_version": 3, "entries": []}, "schema version 3"),
    ({"entries": []}, "no 'schema_version'"),
    ([1, 2], "not a list"),
    ({"format": 1, "entries": []}, "'host' object"),
])
def test_bad_files_are_refused_saying_why(tmp_path, data, says):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PlannerError, match=f"cannot read calibration .*{says}"):
        Calibration.load(path)


def test_a_version_1_file_is_migrated_on_load(tmp_path):
    # version 1 also held the simulated cluster's host and per-entry figures of it
    old = {"format": 1, "machine": "old host", "host": {"shared": True, "cpu_s_per_byte": 1e-9},
           "entries": [{"model": "vgg11", "batch_size": 8, "image_size": 75,
                        "num_classes": 1000, "split_after": "pool5", "full_s": 1.0,
                        "tail_s": 0.2, "steps": 5, "capacity": 1.4,
                        "capacities": [[2, 1.4]], "stanza_beside": [3, 0.5, 0.2]}]}
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(old))
    back = Calibration.load(path)
    assert back == Calibration([entry()], "old host")
    assert migrate(old)["schema_version"] == SCHEMA_VERSION
    back.save(path)  # written back in the current version
    assert set(json.loads(path.read_text())) == {"schema_version", "machine", "entries"}


def test_another_hosts_profile_replaces_this_ones():
    here = Calibration([entry(), entry("alexnet")])
    gpu = Calibration([entry(full=0.01, tail=0.001)], "gpu host")
    merged = here.merged(gpu)
    assert merged.machine == "gpu host"
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


@pytest.mark.parametrize(("ids", "dict_inputs"), [(False, True), (True, False)])
def test_a_model_of_two_inputs_is_timed_as_it_trains(ids, dict_inputs):
    """Its second input's branch on the PS (the raw input crossing, floats or integer ids):
    the whole model, the tail and the head each take their inputs as the model does (a
    model built on a dict whose keys are not sorted takes no list) and are timed."""
    from ralp.planner.calibration import calibrate_entry
    from tests.placement.test_rewriter import _two_input_model

    e = calibrate_entry(_two_input_model(ids, dict_inputs), 4, steps=2)
    assert e.image_size == 8 and e.num_classes == 5 and e.split_after is not None
    assert 0 < e.tail_s <= e.full_s and e.head_s > 0


def test_the_image_side_is_the_image_inputs_wherever_it_is():
    import keras

    from ralp.planner.calibration import shape_facts

    meta, images = keras.Input((4,)), keras.Input((8, 8, 3))
    x = keras.layers.Concatenate()([meta, keras.layers.GlobalAveragePooling2D()(images)])
    assert shape_facts(keras.Model([meta, images], keras.layers.Dense(5)(x))) == (8, 5)


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
