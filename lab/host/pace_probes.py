"""The host's pace: how much work one CPU-second buys on this host while a run runs.

A device's budget is CPU time, but a CPU-second of a virtual machine does not buy the same
work from one minute to the next: other guests share the physical cores, their caches and
their memory. No budget can hold a device's speed against that, so the lab measures it: one
probe process per CPU, pinned to it, does a fixed burst of work of each kind every
``interval_s`` and counts the thread CPU time the burst took. Its cumulative counters sit in a
small file per CPU (:class:`ralp.emulation.counter_files.CounterFile`), read with the devices'
CPU counters when the lab's device watcher (:mod:`lab.host.pace_watcher`) runs the probes, so a
record's window gets the work per CPU-second the host gave in exactly that window.

Three kinds of work, since neighbours slow them differently: ``interpreter`` (a Python loop:
branches and the instruction cache, as TensorFlow's runtime, gRPC and Python code are),
``compute`` (a float32 matrix product in cache: vector units, as convolutions are) and
``memory`` (copying arrays larger than the last-level cache, as the FC layers' weights are at
small batches). The probes sleep between bursts, so they cost a small share of each CPU,
counted in a group of their own.

    python -m lab.host.pace_probes --seconds 60   # the host's pace over a minute, per second
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ralp._process import owner_gone, process_gone, stop_processes
from ralp.emulation.counter_files import CounterFile, Counters, read_counters

KINDS = ("interpreter", "compute", "memory")
INTERVAL_S = 0.1  # one burst of each kind per CPU this often
ROOT = str(Path(__file__).resolve().parents[2])  # where ``lab`` imports from (the probes' path)
_SPIN = 5_000  # loop iterations in one interpreter burst (about 0.1 ms)
_MATRIX = 128  # one compute burst: a 128 x 128 float32 product, 8 times (about 0.3 ms)
_PRODUCTS = 8
_COPY_MB = 2  # one memory burst: 2 MB copied out of 64 MB buffers (about 0.3 ms)
_BUFFER_MB = 64  # twice the last-level cache of the machines this runs on
_STALE_DIR = re.compile(r"^lab-pace-(\d+)-")  # lab-pace-<owner pid>-...: the probes' files


@dataclass(frozen=True)
class PaceReading:
    """Cumulative work done and thread CPU seconds spent, per kind, over every probe."""

    work: tuple[float, ...]
    cpu_s: tuple[float, ...]

    def since(self, start: PaceReading) -> dict[str, float | None]:
        """Work per CPU-second of each kind between ``start`` and this reading (None where no
        burst of that kind finished in between)."""
        out: dict[str, float | None] = {}
        for k, kind in enumerate(KINDS):
            cpu = self.cpu_s[k] - start.cpu_s[k]
            out[kind] = (self.work[k] - start.work[k]) / cpu if cpu > 0 else None
        return out

    def to_list(self) -> list[float]:
        return [*self.work, *self.cpu_s]

    @classmethod
    def from_list(cls, values: Sequence[float]) -> PaceReading:
        n = len(KINDS)
        return cls(tuple(values[:n]), tuple(values[n:2 * n]))


def summed(counters: Sequence[Counters | None]) -> PaceReading | None:
    """The probes' counters (one entry per probe's file, None where one could not be read)
    summed into one reading (None if none could be read)."""
    work, cpu, found = [0.0] * len(KINDS), [0.0] * len(KINDS), False
    for values in counters:
        if values is None or len(values) != 2 * len(KINDS):
            continue
        found = True
        for k in range(len(KINDS)):
            work[k] += values[2 * k]
            cpu[k] += values[2 * k + 1]
    return PaceReading(tuple(work), tuple(cpu)) if found else None


def read_pace(paths: Sequence[str]) -> PaceReading | None:
    """The probes' counters summed over their files (None if none can be read yet)."""
    return summed([read_counters(path) for path in paths])


class PaceProbes:
    """One probe process per CPU this process may use, started by :meth:`start`, stopped (by
    process id) by :meth:`stop`. ``group``: a :class:`~ralp.emulation.devices.DeviceGroup`
    each probe joins first, so that its CPU is counted apart. The probes import this module
    from the repository's root, wherever the run's own working directory is."""

    def __init__(self, group=None, interval_s: float = INTERVAL_S):
        self.group, self.interval_s = group, interval_s
        self.directory: str | None = None
        self.paths: tuple[str, ...] = ()
        self._processes: list[subprocess.Popen] = []

    def start(self) -> PaceProbes:
        sweep_stale_files()
        self.directory = tempfile.mkdtemp(prefix=f"lab-pace-{os.getpid()}-")
        cpus = sorted(os.sched_getaffinity(0))
        self.paths = tuple(os.path.join(self.directory, f"cpu{c}") for c in cpus)
        path_env = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path_env}
        try:
            for cpu, path in zip(cpus, self.paths, strict=True):
                command = [sys.executable, "-m", "lab.host.pace_probes", "--cpu", str(cpu),
                           "--file", path, "--interval", str(self.interval_s),
                           "--parent", str(os.getpid())]
                if self.group is not None:
                    command = self.group.joined_command(command)
                self._processes.append(
                    subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env))
        except BaseException:
            self.stop()
            raise
        return self

    def read(self) -> PaceReading | None:
        return read_pace(self.paths)

    def stop(self) -> None:
        processes, self._processes = self._processes, []
        try:
            stop_processes(processes, 5.0)
        finally:  # the files go even when a second Ctrl-C cuts the wait short
            directory, self.directory = self.directory, None
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self) -> PaceProbes:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def sweep_stale_files() -> list[str]:
    """Remove the probes' directories of processes that are gone (a SIGKILLed run leaves its
    own, as it leaves its groups); returns those removed."""
    root, removed = tempfile.gettempdir(), []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        m = _STALE_DIR.match(name)
        if m is None or not owner_gone(int(m[1])):
            continue
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        removed.append(name)
    return removed


def _bursts():
    """The three bursts, each returning the work it did."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.random((_MATRIX, _MATRIX), dtype=np.float32)
    flops = 2.0 * _MATRIX ** 3 * _PRODUCTS
    n = _BUFFER_MB * 2 ** 20 // 8
    src, dst = np.ones(n), np.ones(n)  # both touched now: no page faults in a burst
    chunk, offset = _COPY_MB * 2 ** 20 // 8, [0]

    def interpreter() -> float:
        for _ in range(_SPIN):
            pass
        return float(_SPIN)

    def compute() -> float:
        for _ in range(_PRODUCTS):
            a @ a
        return flops

    def memory() -> float:
        start = offset[0]
        np.copyto(dst[start:start + chunk], src[start:start + chunk])
        offset[0] = (start + chunk) % n
        return float(chunk * 8 * 2)  # bytes read and written

    return interpreter, compute, memory


def probe(cpu: int, path: str, interval_s: float, parent: int | None,
          seconds: float | None = None) -> None:
    """Run one CPU's probe until killed, ``parent`` is gone or ``seconds`` have passed."""
    os.sched_setaffinity(0, {cpu})
    bursts = _bursts()
    totals = [0.0] * (2 * len(KINDS))
    counters = CounterFile(path, totals)
    end = None if seconds is None else time.monotonic() + seconds
    next_at = time.monotonic()
    while end is None or time.monotonic() < end:
        for k, burst in enumerate(bursts):
            start = time.thread_time()
            work = burst()
            totals[2 * k] += work
            totals[2 * k + 1] += time.thread_time() - start
        counters.write(*totals)
        if parent is not None and os.getppid() != parent and process_gone(parent):
            return
        next_at += interval_s
        time.sleep(max(0.0, next_at - time.monotonic()))


def watch(seconds: int, interval_s: float = INTERVAL_S, on_second=None) -> list[dict]:
    """The host's pace second by second for ``seconds`` seconds: one dict per second, each
    kind's work per CPU-second over it (the probes' first second left out: warm-up)."""
    series = []
    with PaceProbes(interval_s=interval_s) as probes:
        time.sleep(1.0)
        last = probes.read()
        for _ in range(seconds):
            time.sleep(1.0)
            now = probes.read()
            series.append(now.since(last))
            last = now
            if on_second is not None:
                on_second(series)
    return series


def window_spread(series: Sequence[dict], window: int) -> dict[str, list[float]]:
    """Per kind: the lowest and highest mean over consecutive ``window``-second windows,
    as shares of the median second."""
    import statistics

    out = {}
    for kind in KINDS:
        values = [s[kind] for s in series if s[kind]]
        mid = statistics.median(values)
        means = [statistics.fmean(values[i:i + window]) / mid
                 for i in range(0, len(values) - window + 1, window)]
        out[kind] = [round(min(means), 3), round(max(means), 3)] if means else []
    return out


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m lab.host.pace_probes",
                                description=__doc__.splitlines()[0])
    p.add_argument("--cpu", type=int, help="probe this CPU only (as a run's probe does)")
    p.add_argument("--file", help="where the probe keeps its counters")
    p.add_argument("--interval", type=float, default=INTERVAL_S)
    p.add_argument("--parent", type=int, help="exit when this process is gone")
    p.add_argument("--seconds", type=int, default=30, help="without --cpu: how long to watch")
    p.add_argument("--out", help="without --cpu: write the series and its spread as JSON")
    args = p.parse_args(argv)
    if args.cpu is not None:
        if not args.file:
            p.error("--cpu needs --file")
        probe(args.cpu, args.file, args.interval, args.parent)
        return 0
    print("second  " + "  ".join(f"{k:>11}" for k in KINDS) + "   (work per CPU-second, "
          "as a share of the first second's)")

    def show(series):
        first, now = series[0], series[-1]
        print(f"{len(series):6d}  " + "  ".join(
            f"{now[k] / first[k]:11.2f}" if now[k] and first[k] else f"{'-':>11}" for k in KINDS),
            flush=True)

    series = watch(args.seconds, args.interval, show)
    windows = {w: window_spread(series, w) for w in (1, 10, 30) if w <= len(series)}
    for w, spread in windows.items():
        print(f"{w:3d} s windows, lowest-highest as shares of the median second: " + ", ".join(
            f"{k} {lo:.2f}-{hi:.2f}" for k, (lo, hi) in spread.items()))
    if args.out:
        with open(args.out, "w") as f:
            command = " ".join(["python -m lab.host.pace_probes", *sys.argv[1:]])
            json.dump({"command": command, "interval_s": args.interval,
                       "series": series, "windows": windows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
