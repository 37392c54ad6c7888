"""The devices' extension point: a watcher named by $RALP_DEVICE_WATCHER is made with every
budget, adds its words to --device-cpus, starts and stops with the run's groups, and what its
counter files read lands in the record's window; without one, ralp has no such words."""

import os

import pytest

from ralp.emulation.budget import Budget, budget_for, device_cpus, fidelity
from ralp.emulation.cpu_meter import CpuReading, CpuSnapshot, DeviceMeter
from ralp.emulation.watchers import WATCHER_ENV
from ralp.errors import ClusterError
from tests.emulation.cgroups import needs_cgroups
from tests.emulation.tiny_watcher import GROUP, SPEC, TinyWatcher


@pytest.fixture
def attached(monkeypatch):
    monkeypatch.setenv(WATCHER_ENV, SPEC)


def test_a_watcher_s_word_is_the_default_budget_and_unknown_without_it(monkeypatch):
    monkeypatch.delenv(WATCHER_ENV, raising=False)
    with pytest.raises(ClusterError, match=f"'auto' or 'shared'.*{WATCHER_ENV}; none is attached"):
        device_cpus("tiny", 4, cpus=2, reserve=0.3)
    monkeypatch.setenv(WATCHER_ENV, SPEC)
    assert device_cpus("tiny", 4, cpus=2, reserve=0.3) == device_cpus("auto", 4, cpus=2, reserve=0.3)
    with pytest.raises(ClusterError, match="'auto', 'tiny' or 'shared'"):
        device_cpus("fast", 4, cpus=2, reserve=0.3)


def test_a_watcher_that_cannot_be_imported_is_named(monkeypatch):
    monkeypatch.setenv(WATCHER_ENV, "tests.emulation.no_such_module:Watcher")
    with pytest.raises(ClusterError, match="no device watcher there"):
        device_cpus("tiny", 4, cpus=2, reserve=0.3)


def test_the_watcher_s_fields_join_the_window_and_its_group_counts_apart():
    tasks = {"worker:0": CpuReading(0.0, 0, 0), GROUP: CpuReading(0.0, 0, 0)}
    before = CpuSnapshot(0.0, 0.0, 0.0, tasks, ((1.0,),))
    after = CpuSnapshot(10.0, 6.0, 0.0, {"worker:0": CpuReading(4.0, 1000, 10),
                                         GROUP: CpuReading(0.5, 0, 0)}, ((4.0,),))
    figures = fidelity(Budget(0.5, 2, watcher=TinyWatcher("tiny")), before, after)
    assert figures["tiny"] == {"moved": 3.0, "asked": "tiny"} and figures["tiny_cpus"] == 0.05
    assert set(figures["tasks"]) == {"worker:0"}
    assert CpuSnapshot.from_dict(after.to_dict()) == after  # as a job sends it
    assert "tiny" not in fidelity(Budget(0.5, 2), before, after)  # no watcher, no fields


@needs_cgroups
def test_a_budget_s_watcher_runs_with_the_groups_and_its_reading_lands_in_the_record(attached):
    budget = budget_for("tiny", 2)
    watcher = budget.watcher
    assert isinstance(watcher, TinyWatcher) and (watcher.asked, watcher.cpus) == ("tiny", budget.cpus)
    assert budget.describe().endswith("watched as 'tiny'")
    with budget.groups(["dev"]) as groups:
        assert watcher.events == [f"start {groups.prefix}"]
        meter = groups.meter({"worker:0": "dev"})
        assert DeviceMeter.from_json(meter.to_json()) == meter  # as a Horovod rank gets it
        before = meter()
        watcher.counters.write(7.0)
        after = CpuSnapshot.from_dict(meter().to_dict())
        path = watcher.path
    figures = fidelity(budget, before, after)
    assert figures["tiny"] == {"moved": 7.0, "asked": "tiny"}
    assert figures["tiny_cpus"] is not None and GROUP not in figures["tasks"]
    assert watcher.events[-1] == "stop" and not os.path.exists(path)
    assert budget_for("auto", 2).watcher.asked == "auto"  # every budget gets one


def test_without_a_watcher_a_budget_has_none(monkeypatch):
    monkeypatch.delenv(WATCHER_ENV, raising=False)
    assert budget_for("auto", 2).watcher is None
