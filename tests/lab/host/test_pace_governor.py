"""Paced budgets: the governor shrinks the devices' quotas while the host is faster than the
reference pace, never grows them past the budget, counts what it did, and stops with the run;
the lab's device watcher makes 'paced' a word of --device-cpus."""

import os
import time

import pytest

from lab.host.pace_governor import (
    MIN_SHARE,
    REFERENCE_ENV,
    GovernorReading,
    pace_reference,
    quota_share,
    read_governor,
)
from lab.host.pace_watcher import ENV, PACED, PaceWatcher
from ralp.emulation.budget import Budget, budget_for, device_cpus, fidelity
from ralp.emulation.devices import MIN_QUOTA_US, PERIOD_US, DeviceGroups, new_prefix
from ralp.emulation.watchers import WATCHER_ENV
from ralp.errors import ClusterError
from tests.emulation.cgroups import HIERARCHY, needs_cgroups
from tests.emulation.test_devices import _cpu_share


def test_the_quota_buys_the_reference_work_and_never_exceeds_the_budget():
    assert quota_share(60.0, 80.0) == pytest.approx(0.75)  # a fast host: less CPU time
    assert quota_share(60.0, 60.0) == 1.0
    assert quota_share(60.0, 45.0) == 1.0  # a slow host: the budget, no more
    assert quota_share(60.0, 1e6) == MIN_SHARE  # a stalled probe cannot starve a device
    assert quota_share(60.0, None) == 1.0  # no reading yet


def test_a_governor_reading_gives_the_mean_share_of_a_window():
    start, end = GovernorReading(1.0, 0.8, 0.0), GovernorReading(3.0, 2.3, 0.5)
    assert end.since(start) == {"quota_share": pytest.approx(0.75),
                                "under_reference_share": pytest.approx(0.25)}
    assert start.since(start) is None


def test_paced_is_a_word_of_the_lab_s_watcher_only(monkeypatch):
    monkeypatch.delenv(WATCHER_ENV, raising=False)
    with pytest.raises(ClusterError, match="RALP_DEVICE_WATCHER"):
        device_cpus(PACED, 4, cpus=2, reserve=0.3)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    assert device_cpus(PACED, 4, cpus=2, reserve=0.3) == device_cpus("auto", 4, cpus=2, reserve=0.3)


def test_the_paced_budget_is_held_to_the_reference_which_can_be_set(monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(REFERENCE_ENV, "123.5")
    pace_reference.cache_clear()
    try:
        assert pace_reference() == 123.5
        if HIERARCHY is not None:
            budget = budget_for(PACED, 4)
            assert budget.watcher.reference == 123.5 and "paced to" in budget.describe()
            plain = budget_for("auto", 4)
            assert plain.watcher.reference is None and "host pace probed" in plain.describe()
    finally:
        pace_reference.cache_clear()


@needs_cgroups
def test_a_paced_budget_needs_a_budget():
    groups = DeviceGroups(HIERARCHY, new_prefix(), ["dev"], None, watcher=PaceWatcher(reference=1.0))
    with pytest.raises(ClusterError, match="paced"):
        groups.open()
    assert groups._made == []  # its groups went with the failed start


def _quota(groups, name):
    with open(os.path.join(groups.hierarchy.limit, groups.prefix, name, "cpu.cfs_quota_us")) as f:
        return int(f.read())


def _governed(cpus: float, reference: float, ready) -> tuple[int, float, dict, str]:
    """A busy device under a governor held to ``reference``, measured once ``ready(groups)``
    (the governor has acted): its quota after, its CPU share, the record's ``paced`` field
    and the governor's file."""
    watcher = PaceWatcher(reference=reference)
    with DeviceGroups(HIERARCHY, new_prefix(), ["dev"], cpus, watcher=watcher) as groups:
        deadline = time.monotonic() + 30  # the probes' first bursts (numpy's import) come first
        while not ready(groups) and time.monotonic() < deadline:
            time.sleep(0.1)
        meter = groups.meter({"worker:0": "dev"})
        before = meter()
        share = _cpu_share(groups.group("dev"), 1.5)
        after = meter()
        quota, path = _quota(groups, "dev"), watcher._governor.path
    return quota, share, fidelity(Budget(cpus, 2, watcher=watcher), before, after)["paced"], path


needs_v1 = pytest.mark.skipif(HIERARCHY is not None and HIERARCHY.version != 1,
                              reason="reads cgroup v1 quotas")


@needs_cgroups
@needs_v1
def test_a_host_faster_than_the_reference_gets_a_smaller_quota_and_the_record_says_so():
    cpus = 0.4
    # a reference far below any real pace: the quota falls to its floor, half the budget
    floor = max(MIN_QUOTA_US, round(cpus * MIN_SHARE * PERIOD_US))
    quota, share, paced, path = _governed(cpus, 1.0, lambda g: _quota(g, "dev") == floor)
    assert quota == floor
    assert share <= cpus * MIN_SHARE * 1.1, share
    assert paced["reference"] == 1.0
    assert paced["quota_share"] == pytest.approx(MIN_SHARE, abs=0.1)
    assert paced["under_reference_share"] == 0.0
    assert read_governor(path) is None  # its file is gone with the run


@needs_cgroups
@needs_v1
def test_a_host_slower_than_the_reference_keeps_the_budget_and_the_record_says_so():
    cpus = 0.4
    quota, share, paced, _ = _governed(
        cpus, 1e18, lambda g: read_governor(g.watcher._governor.path).under_reference_s > 0)
    assert quota == round(cpus * PERIOD_US)  # never above the budget
    assert cpus * 0.5 <= share <= cpus * 1.1, share
    assert paced["quota_share"] == 1.0 and paced["under_reference_share"] > 0.7, paced


def test_the_measured_reference_is_a_share_of_the_idle_pace_and_passes_to_children(monkeypatch):
    monkeypatch.delenv(REFERENCE_ENV, raising=False)
    pace_reference.cache_clear()
    try:
        reference = pace_reference()
        assert reference > 0
        assert float(os.environ[REFERENCE_ENV]) == reference  # a child process inherits it
        assert pace_reference() == reference  # measured once
    finally:
        pace_reference.cache_clear()
