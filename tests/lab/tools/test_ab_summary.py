"""An A/B summary's CPU per worker batch: the budgeted devices' CPU over the window, summed."""

import pytest

from lab.tools.ab_summary import cpu_medians, cpu_per_batch
from tests.bench.records_fixtures import record


def _cpu(*used: float, coordinator: float = 0.3) -> dict:
    tasks = {f"worker:{k}": {"used_cpus": u, "budget_use": u / 0.5} for k, u in enumerate(used)}
    tasks["chief:0"] = {"used_cpus": coordinator}  # counted apart: not a budgeted device
    return {"budget_cpus": 0.5, "wall_s": 10.0, "tasks": tasks}


def test_the_budgeted_devices_cpu_is_summed_per_worker_batch():
    r = record(mode="horovod", workers=2, ps=0, cpu=_cpu(0.4, 0.3), measured_steps=20)
    assert cpu_per_batch(r) == pytest.approx((0.4 + 0.3) * 10.0 / 20)
    assert cpu_per_batch({**r, "cpu": None}) is None
    assert cpu_per_batch({**r, "error": "failed"}) is None


def test_each_setting_takes_the_median_over_its_rounds():
    rounds = [record(mode="horovod", workers=1, ps=0, cpu=_cpu(u), measured_steps=10)
              for u in (0.2, 0.4, 0.3)]
    (cost,) = cpu_medians(rounds).values()
    assert cost == pytest.approx(0.3)
