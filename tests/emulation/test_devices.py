"""Simulated devices: control groups with a CPU budget, joined by the task itself, counted,
and removed; the fall-back where none can be made."""

import multiprocessing
import os
import subprocess
import time

import pytest

from ralp.emulation.budget import Budget, budget_for, device_cpus, fidelity, thread_counts
from ralp.emulation.cpu_meter import (
    CGROUP_ROOT_ENV,
    CpuReading,
    CpuSnapshot,
    DeviceMeter,
    find_hierarchy,
)
from ralp.emulation.devices import MIN_QUOTA_US, PERIOD_US, DeviceGroups, new_prefix
from ralp.errors import ClusterError
from tests.emulation.cgroups import HIERARCHY, needs_cgroups


def _burn(group, seconds: float, threads: int, out) -> None:
    """Join ``group``, then keep ``threads`` threads busy for ``seconds`` of wall time; send
    back the process' CPU time over that window (its own count, not the group's)."""
    import threading

    group.join()
    start_cpu, start = time.process_time(), time.monotonic()

    def spin():
        while time.monotonic() - start < seconds:
            pass

    workers = [threading.Thread(target=spin) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.send((time.process_time() - start_cpu) / (time.monotonic() - start))


def _cpu_share(group, seconds: float = 1.5, threads: int = 1) -> float:
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_burn, args=(group, seconds, threads, child))
    p.start()
    share = parent.recv()
    p.join()
    return share


@needs_cgroups
@pytest.mark.parametrize("cpus, threads", [(0.3, 1), (0.5, 2)])
def test_a_task_in_a_budget_uses_no_more_cpu_than_its_budget(cpus, threads):
    with DeviceGroups(HIERARCHY, new_prefix(), ["dev"], cpus) as groups:
        share = _cpu_share(groups.group("dev"), threads=threads)
    # the whole process is held, however many threads it runs
    assert share <= cpus * 1.1, share
    assert share >= cpus * 0.5, share  # and it did get CPU (a limit, not a stop)


@needs_cgroups
def test_an_unlimited_group_only_counts_and_the_meter_sees_both():
    with DeviceGroups(HIERARCHY, new_prefix(), ["dev"], 0.3, unlimited=["coord"]) as groups:
        meter = groups.meter({"worker:0": "dev", "chief:0": "coord"})
        before = meter()
        limited = _cpu_share(groups.group("dev"), 1.0)
        free = _cpu_share(groups.group("coord"), 1.0)
        after = meter()
    assert limited <= 0.33 and free > 0.5, (limited, free)
    figures = fidelity(Budget(0.3, 2), before, after, unbudgeted=("chief:0",))
    tasks = figures["tasks"]
    # each group counted what its process used (the two ran one after the other, ~1 s each)
    assert tasks["worker:0"]["used_cpus"] * figures["wall_s"] == pytest.approx(limited, rel=0.25)
    assert tasks["chief:0"]["used_cpus"] * figures["wall_s"] == pytest.approx(free, rel=0.25)
    assert tasks["worker:0"]["throttled_share"] > 0.5  # it wanted more than 0.3 CPU
    assert "throttled_share" not in tasks["chief:0"]  # counted only, no budget
    assert figures["unbudgeted_cpus"] >= tasks["chief:0"]["used_cpus"] * 0.9
    # a meter travels to the job that reads it (a Horovod rank gets it as JSON)
    assert DeviceMeter.from_json(meter.to_json()) == meter
    assert CpuSnapshot.from_dict(after.to_dict()) == after


def _quota_us(groups, name) -> int:
    """Group ``name``'s CFS quota as the kernel holds it (-1: no limit)."""
    directory = os.path.join(groups.hierarchy.limit, groups.prefix, name)
    if groups.hierarchy.version == 2:
        with open(os.path.join(directory, "cpu.max")) as f:
            quota = f.read().split()[0]
        return -1 if quota == "max" else int(quota)
    with open(os.path.join(directory, "cpu.cfs_quota_us")) as f:
        return int(f.read())


@needs_cgroups
def test_a_group_s_limit_is_its_budget_and_changes_while_the_run_goes_on():
    with DeviceGroups(HIERARCHY, new_prefix(), ["dev"], 0.4, unlimited=["coord"]) as groups:
        assert (_quota_us(groups, "dev"), _quota_us(groups, "coord")) == (0.4 * PERIOD_US, -1)
        groups.limit("dev", 0.2)
        assert _quota_us(groups, "dev") == 0.2 * PERIOD_US
        groups.limit("dev", 0.0)  # the kernel's smallest quota, not none
        assert _quota_us(groups, "dev") == MIN_QUOTA_US
        groups.limit("coord", 0.3)
        groups.limit("dev", None)
        assert (_quota_us(groups, "dev"), _quota_us(groups, "coord")) == (-1, 0.3 * PERIOD_US)
        with pytest.raises(ClusterError, match="no device 'gpu'"):
            groups.limit("gpu", 0.2)


@needs_cgroups
def test_groups_are_gone_after_close_and_a_process_inside_is_reported():
    groups = DeviceGroups(HIERARCHY, new_prefix(), ["a", "b"], 0.5).open()
    dirs = [d for name in ("a", "b") for d in groups.group(name).dirs]
    assert all(os.path.isdir(d) for d in dirs)
    sleeper = subprocess.Popen(groups.group("a").joined_command(["sleep", "30"]))
    try:
        deadline = time.monotonic() + 5
        while not groups.group("a").holds(sleeper.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert groups.group("a").holds(sleeper.pid)  # it joined before exec'ing sleep
        left = groups.close(wait_s=0.2)
        assert left and all("/a" in path or path.endswith(groups.prefix) for path in left)
    finally:
        sleeper.kill()
        sleeper.wait()
    from ralp.emulation.devices import remove_groups

    assert remove_groups(left) == []
    assert not any(os.path.exists(d) for d in dirs)


@needs_cgroups
def test_a_dead_runs_groups_are_swept_by_the_next_run():
    dead = _dead_pid()
    stale = os.path.join(HIERARCHY.limit, f"rlp{dead}-d0")
    os.makedirs(os.path.join(stale, "w0"))
    try:
        with DeviceGroups(HIERARCHY, new_prefix(), ["w0"], 0.5):
            assert not os.path.exists(stale)
    finally:
        for path in (os.path.join(stale, "w0"), stale):
            if os.path.exists(path):
                os.rmdir(path)


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_no_writable_cgroup_root_means_no_hierarchy_and_says_why(tmp_path):
    assert find_hierarchy(str(tmp_path))[0] is None
    assert "no cgroup cpu controller" in find_hierarchy(str(tmp_path))[1]


def test_an_unwritable_cgroup_root_falls_back_to_shared_cpus(read_only_cgroup_root, monkeypatch):
    hierarchy, why = find_hierarchy(read_only_cgroup_root)
    assert hierarchy is None and "cannot create a control group" in why, why
    monkeypatch.setenv(CGROUP_ROOT_ENV, read_only_cgroup_root)
    budget = budget_for("auto", 4)
    assert budget.cpus is None and budget.hierarchy is None
    assert "cannot create a control group" in budget.fallback
    assert "shared CPUs" in budget.describe()
    record = fidelity(budget, None, None)
    assert record["fallback"] == budget.fallback and record["kept_up"] is None


def test_the_default_budget_shares_what_the_reserve_leaves():
    assert device_cpus("auto", 4, cpus=2, reserve=0.3) == pytest.approx(0.425)
    assert device_cpus(None, 8, cpus=16, reserve=1.0) == pytest.approx(1.875)
    assert device_cpus("shared", 4, cpus=2) is None
    assert device_cpus("0.45", 4, cpus=2) == 0.45
    for bad, message in (("1", "more than this host's 2"), ("0", "positive"),
                         ("nan", "positive"), ("fast", "give CPUs per device")):
        with pytest.raises(ClusterError, match=message):
            device_cpus(bad, 4, cpus=2)
    with pytest.raises(ClusterError, match="leave nothing"):
        device_cpus("auto", 4, cpus=1, reserve=1.0)


def test_thread_pools_follow_the_budget():
    assert thread_counts(None) is None  # shared: TensorFlow's own
    assert thread_counts(0.425) == (1, 2)  # one intra-op thread; two inter-op (one deadlocks)
    assert thread_counts(1.875) == (2, 2)
    assert thread_counts(4.0) == (4, 4)


def _snapshot(t, busy, steal, **tasks):
    return CpuSnapshot(t, busy, steal, {k: CpuReading(*v) for k, v in tasks.items()})


def test_fidelity_flags_a_host_that_could_not_keep_up():
    before = _snapshot(0.0, 0.0, 0.0, w0=(0.0, 0, 0), w1=(0.0, 0, 0), chief=(0.0, 0, 0))
    # 10 s: each device used 0.4 of its 0.5 CPU; the coordinator 0.3; the kernel 0.2 more
    after = _snapshot(10.0, 13.0, 0.0, w0=(4.0, 1000, 100), w1=(4.0, 1000, 300),
                      chief=(3.0, 0, 0))
    figures = fidelity(Budget(0.5, 2), before, after, unbudgeted=("chief",))
    assert figures["tasks"]["w0"] == {"used_cpus": 0.4, "budget_use": 0.8, "throttled_share": 0.1}
    assert figures["tasks"]["w1"]["throttled_share"] == 0.3
    assert figures["unbudgeted_cpus"] == pytest.approx(0.5)  # 1.3 - 0.8: coordinator + kernel
    assert figures["kept_up"] is True  # 2 x 0.5 + 0.5 < 2
    assert figures["busy_beside"] is False  # the run's own outside work: about the reserve
    stolen = _snapshot(10.0, 13.0, 5.0, w0=(4.0, 1000, 100), w1=(4.0, 1000, 300),
                       chief=(3.0, 0, 0))
    assert fidelity(Budget(0.5, 2), before, stolen, unbudgeted=("chief",))["kept_up"] is False
    busy = _snapshot(10.0, 18.0, 0.0, w0=(4.0, 1000, 100), w1=(4.0, 1000, 300),
                     chief=(3.0, 0, 0))
    assert fidelity(Budget(0.5, 2), before, busy, unbudgeted=("chief",))["kept_up"] is False
    assert fidelity(Budget(None, 2), before, busy)["kept_up"] is None  # shared: no budget


def test_fidelity_says_when_other_work_ran_beside_the_run():
    """CPU outside the budgets beyond twice the reserve: something else ran on the host, even
    where the budgets plus it still fit in the host's CPUs."""
    from ralp.emulation.budget import BUSY_BESIDE_CPUS

    assert pytest.approx(0.6) == BUSY_BESIDE_CPUS
    before = _snapshot(0.0, 0.0, 0.0, w0=(0.0, 0, 0), w1=(0.0, 0, 0))
    for outside, beside in ((0.5, False), (0.7, True)):
        after = _snapshot(10.0, 5.0 + 10 * outside, 0.0, w0=(2.5, 1000, 0), w1=(2.5, 1000, 0))
        figures = fidelity(Budget(0.25, 2), before, after)
        assert figures["unbudgeted_cpus"] == pytest.approx(outside)
        assert figures["kept_up"] is True  # 2 x 0.25 + 0.7 < 2: no device went short
        assert figures["busy_beside"] is beside
