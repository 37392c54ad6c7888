"""The host's pace probes: what they count, that the devices' meter reads them into every
record's window when the lab's watcher runs them, and that they leave nothing behind."""

import os
import signal
import subprocess
import sys
import time

import pytest

from lab.host.pace_probes import _SPIN, KINDS, PaceProbes, PaceReading, read_pace, summed
from lab.host.pace_watcher import PACE_GROUP, PaceWatcher
from ralp.emulation.budget import Budget, fidelity
from ralp.emulation.cpu_meter import CpuReading, CpuSnapshot
from ralp.emulation.devices import DeviceGroups, new_prefix
from tests.emulation.cgroups import HIERARCHY, needs_cgroups


def _wait_for(probes: PaceProbes, bursts: int = 3, timeout: float = 20.0) -> PaceReading:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reading = probes.read()
        if reading is not None and reading.work[0] >= bursts * _SPIN * len(probes.paths):
            return reading
        time.sleep(0.05)
    raise AssertionError("the probes counted no work")


def test_a_reading_gives_work_per_cpu_second_per_kind():
    start = PaceReading((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    end = PaceReading((10.0, 6.0, 0.0), (2.0, 3.0, 0.0))
    assert end.since(start) == {"interpreter": 5.0, "compute": 2.0, "memory": None}
    assert PaceReading.from_list(end.to_list()) == end


def test_the_probes_count_whole_bursts_and_stop_by_their_ids(tmp_path):
    probes = PaceProbes(interval_s=0.02).start()
    try:
        pids = [p.pid for p in probes._processes]
        assert len(pids) == len(os.sched_getaffinity(0))  # one per CPU
        first = _wait_for(probes)
        time.sleep(0.3)
        second = probes.read()
    finally:
        probes.stop()
    assert second.work[0] % _SPIN == 0  # fixed bursts, counted whole
    pace = second.since(first)
    assert set(pace) == set(KINDS)
    assert all(v is not None and v > 0 for v in pace.values()), pace
    # the probes' CPU is a small part of the wall time they ran (bursts, then sleep)
    cpu = sum(second.cpu_s) - sum(first.cpu_s)
    assert cpu < 0.3 * len(pids), cpu
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid)
    assert probes.directory is None and read_pace(probes.paths) is None


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1].startswith("Z")


def test_a_probe_exits_when_the_run_that_started_it_is_killed(tmp_path):
    launcher = subprocess.Popen(
        [sys.executable, "-c",
         "import time; from lab.host.pace_probes import PaceProbes\n"
         "p = PaceProbes(interval_s=0.05).start()\n"
         "print(' '.join(str(x.pid) for x in p._processes), flush=True)\n"
         "time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    pids = [int(x) for x in launcher.stdout.readline().split()]
    time.sleep(1.0)
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{p}") for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{p}") for p in pids)


def test_fidelity_reports_the_pace_in_the_window_and_counts_the_probes_apart():
    tasks = {"worker:0": CpuReading(0.0, 0, 0), PACE_GROUP: CpuReading(0.0, 0, 0)}
    # two probes' files: their counters add up; one not readable yet counts for nothing
    before = CpuSnapshot(0.0, 0.0, 0.0, tasks, ((0.0,) * 6, (0.0,) * 6, None))
    after = CpuSnapshot(
        10.0, 6.0, 0.0,
        {"worker:0": CpuReading(4.0, 1000, 10), PACE_GROUP: CpuReading(0.5, 0, 0)},
        ((200.0, 0.05, 40.0, 0.1, 40.0, 0.2), (100.0, 0.05, 40.0, 0.1, 0.0, 0.0), None))
    budget = Budget(0.5, 2, watcher=PaceWatcher())
    figures = fidelity(budget, before, after)
    assert figures["host_pace"] == {"interpreter": 3000.0, "compute": 400.0, "memory": 200.0}
    assert set(figures["tasks"]) == {"worker:0"} and figures["pace_probe_cpus"] == 0.05
    # the host used 0.6 CPU: 0.4 the device, the rest (the probes' 0.05 among it) outside
    assert figures["unbudgeted_cpus"] == pytest.approx(0.2)
    assert "paced" not in figures  # the plain budget: probes, no governor
    no_probes = CpuSnapshot(0.0, 0.0, 0.0, tasks)
    assert "host_pace" not in fidelity(budget, no_probes, after)
    assert summed([None]) is None


@needs_cgroups
def test_device_groups_with_pace_meter_it_and_remove_everything():
    watcher = PaceWatcher()
    groups = DeviceGroups(HIERARCHY, new_prefix(), ["dev"], 0.4, watcher=watcher).open()
    try:
        meter = groups.meter({"worker:0": "dev"})
        pids = [p.pid for p in watcher._probes._processes]
        deadline = time.monotonic() + 20
        while ((summed(meter().watch) is None or summed(meter().watch).work[0] == 0)
               and time.monotonic() < deadline):
            time.sleep(0.05)
        before = meter()
        time.sleep(0.5)
        after = meter()
        figures = fidelity(Budget(0.4, 2, watcher=watcher), before, after)
        directory = os.path.join(HIERARCHY.limit, groups.prefix)
    finally:
        groups.close()
    assert all(figures["host_pace"][k] > 0 for k in KINDS), figures
    assert figures["pace_probe_cpus"] > 0  # the probes ran in their own group
    assert not os.path.exists(directory)
    assert not any(os.path.exists(f"/proc/{p}") and not _zombie(p) for p in pids)


def test_the_probes_files_of_a_run_that_is_gone_are_swept_and_a_live_runs_kept(tmp_path, monkeypatch):
    import tempfile

    from lab.host.pace_probes import sweep_stale_files
    from tests.emulation.test_devices import _dead_pid

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone, live, other = (tmp_path / f"lab-pace-{_dead_pid()}-x", tmp_path / f"lab-pace-{os.getppid()}-y",
                         tmp_path / "lab-pace-notapid")
    for d in (gone, live, other):
        d.mkdir()
        (d / "cpu0").write_bytes(b"")
    assert sweep_stale_files() == [gone.name]
    assert not gone.exists() and live.exists() and other.exists()
    with PaceProbes(interval_s=0.05) as probes:  # a run's own directory: named for its launcher
        assert os.path.basename(probes.directory).startswith(f"lab-pace-{os.getpid()}-")
        directory = probes.directory
    assert not os.path.exists(directory)
