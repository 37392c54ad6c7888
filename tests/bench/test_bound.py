"""Every record against its bound: the compute alone from its calibration through the
planner's formula, the wire time, and the step over the longer of the two."""

import pytest

from ralp.bench.bound import bound_figures, compute_step_s
from ralp.planner.terms import Compute
from ralp.planner.topology import compute_step_s as formula
from tests.bench.records_fixtures import failed, record

ENTRY = {"model": "vgg19", "batch_size": 32, "image_size": 64, "num_classes": 10,
         "split_after": "flatten", "full_s": 0.5, "tail_s": 0.2, "steps": 10,
         "tail_stacked_s": 0.5, "stacked": 4, "head_s": 0.3}
CALIBRATION = {"schema_version": 2, "machine": "here", "entries": [ENTRY],
               "measured_at": 1.0, "seconds": 3.0}


def test_the_compute_alone_is_each_modes_formula_at_an_infinite_rate():
    c = Compute(0.5, 0.2, 0.5, 4, 0.3)
    assert formula(c, "ps", 2, 2) == 0.5 == formula(c, "horovod", 4, 0)
    assert formula(c, "collective", 4, 0) == 0.5
    assert formula(c, "ralp-n", 3, 1) == pytest.approx(max(0.3 + 0.2, 3 * 0.2))
    assert formula(c, "ralp-n", 3, 1, "bsp") == pytest.approx(0.3 + 3 * 0.2)
    assert formula(c, "stanza", 3, 1) == pytest.approx(0.3 + 0.2 + 2 * 0.1)


def test_every_successful_record_gets_its_bound_ratio():
    cases = [record(mode="ps", workers=2, ps=2, step_time_s=0.9, wire_step_time_s=0.7,
                    calibration=CALIBRATION),
             record(mode="ralp-n", workers=3, ps=1, step_time_s=0.9, wire_step_time_s=0.1,
                    calibration=CALIBRATION),
             record(mode="ps", workers=2, ps=2, step_time_s=0.9, wire_step_time_s=None,
                    calibration=CALIBRATION),
             record(mode="ps", workers=2, ps=2, step_time_s=0.9, wire_step_time_s=0.3,
                    calibration=None)]
    for r in cases:
        for k in ("compute_step_time_s", "bound_step_time_s", "bound_ratio"):
            r[k] = None
        r.update(bound_figures(r))
        assert r["bound_ratio"] is not None
        sides = [s for s in (r["compute_step_time_s"], r["wire_step_time_s"]) if s]
        assert r["bound_step_time_s"] == max(sides)
        assert r["bound_ratio"] == pytest.approx(0.9 / max(sides))
    assert cases[0]["compute_step_time_s"] == 0.5 and cases[0]["bound_step_time_s"] == 0.7
    assert cases[1]["compute_step_time_s"] == pytest.approx(0.6)
    assert cases[3]["compute_step_time_s"] is None  # no calibration: the wire side alone


def test_a_failed_record_or_another_workloads_calibration_gives_no_bound():
    assert bound_figures(failed(calibration=CALIBRATION))["bound_ratio"] is None
    other = record(model="alexnet", calibration=CALIBRATION, wire_step_time_s=None)
    assert compute_step_s(other) is None
    assert bound_figures(other)["bound_ratio"] is None
