"""Every record against its bound: the compute alone from its calibration through the
planner's formula, the wire time, the busiest device's CPU time, and the step over the
longest of them."""

import pytest

from ralp.bench.bound import bound_figures, bound_side, compute_step_s, cpu_step_s
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


def _cpu(ps_used: float, worker_used: float, wall: float = 20.0) -> dict:
    """A ``cpu`` field of 0.5-CPU devices: one PS task, three workers, a coordinator apart."""
    tasks = {"ps:0": {"used_cpus": ps_used, "budget_use": ps_used / 0.5},
             **{f"worker:{k}": {"used_cpus": worker_used, "budget_use": worker_used / 0.5}
                for k in range(3)},
             "chief:0": {"used_cpus": 0.9}}  # unbudgeted: no budget_use, never the bound
    return {"budget_cpus": 0.5, "wall_s": wall, "tasks": tasks}


def test_the_busiest_devices_cpu_time_per_step_is_a_side_of_the_bound():
    # 20 s window, 60 worker batches of 3 workers: 20 steps of 1.0 s; the PS task used 0.45
    # of its 0.5 CPU: 0.9 s of its budget per step, the workers 0.2 / 0.5 of theirs
    r = record(mode="ralp-n", workers=3, ps=1, step_time_s=1.0, wire_step_time_s=0.3,
               calibration=CALIBRATION, cpu=_cpu(0.45, 0.2), measured_steps=60)
    assert cpu_step_s(r) == (pytest.approx(0.9), "ps:0")
    r.update(bound_figures(r))
    assert r["cpu_step_time_s"] == pytest.approx(0.9) and r["busiest_cpu_task"] == "ps:0"
    assert r["bound_step_time_s"] == pytest.approx(0.9)
    assert r["bound_ratio"] == pytest.approx(1.0 / 0.9)
    assert bound_side(r) == "cpu ps:0"
    # a device well inside its budget: the compute or the wire is the bound
    idle = record(mode="ralp-n", workers=3, ps=1, step_time_s=1.0, wire_step_time_s=0.7,
                  calibration=CALIBRATION, cpu=_cpu(0.1, 0.2), measured_steps=60)
    idle.update(bound_figures(idle))
    assert idle["cpu_step_time_s"] == pytest.approx(0.4)
    assert idle["bound_step_time_s"] == 0.7 and bound_side(idle) == "wire"


def test_without_budgets_there_is_no_cpu_side():
    shared = _cpu(0.45, 0.2)
    for row in shared["tasks"].values():
        row.pop("budget_use", None)
    for cpu in (None, {"budget_cpus": None, "wall_s": 20.0, "tasks": {}}, shared):
        r = record(mode="ps", workers=2, ps=2, step_time_s=0.9, wire_step_time_s=0.7,
                   calibration=CALIBRATION, cpu=cpu, measured_steps=40)
        assert cpu_step_s(r) is None
        r.update(bound_figures(r))
        assert r["cpu_step_time_s"] is None and r["bound_step_time_s"] == 0.7
