"""Run a command and sample, every ``--interval`` seconds, the CPU time of every thread in the
control groups its runs make (a simulated device per group), by kind of thread; write the
samples as JSON.

    .venv/bin/python -m lab.tools.thread_cpu --out FILE.json -- lab/tools/ab_commits.sh ...

A run's groups are the ``rlp<pid>-...`` groups whose pid is the command's process or one of
its descendants (the bench's launcher names them so): nothing of another run is read. A
thread is of kind ``main`` (a process's first thread), ``tf`` (TensorFlow's pools name
theirs ``tf_...``), ``python`` (any other thread named as the process is: a Horovod rank's
background and Gloo threads, which Horovod starts unnamed, and Python's own threads) or
``other``. Each sample is the CPU seconds each kind has used so far in each group (a thread
that has exited keeps its last reading), so differences between samples are what each kind
used in between; the last reading of every thread (kind, CPU seconds, name) closes the file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time

from ralp.emulation.cpu_meter import find_hierarchy

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
_PREFIX = re.compile(r"^rlp(\d+)")
KINDS = ("main", "tf", "python", "other")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m lab.tools.thread_cpu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="the samples, JSON")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = p.parse_args(argv)
    args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.command:
        p.error("give the command to run after --")
    return args


def descendants(root: int) -> set[int]:
    """``root`` and every live process below it."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def thread_reading(pid: int, tid: int) -> tuple[str, float, str] | None:
    """``(kind, CPU seconds, name)`` of thread ``tid`` of process ``pid``, None once it is
    gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            text = f.read()
        with open(f"/proc/{pid}/comm") as f:
            process_name = f.read().strip()
    except OSError:
        return None
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) * TICK_S  # utime, stime
    if tid == pid:
        kind = "main"
    elif name.startswith("tf_"):
        kind = "tf"
    elif name == process_name:
        kind = "python"
    else:
        kind = "other"
    return kind, cpu, name


def _tgid(tid: int) -> int | None:
    try:
        with open(f"/proc/{tid}/status") as f:
            for line in f:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Sampler:
    """The groups of one command's runs, and every thread's last reading in each."""

    def __init__(self, root_pid: int, limit_dir: str, thread_file: str):
        self.root_pid, self.limit_dir, self.thread_file = root_pid, limit_dir, thread_file
        self.threads: dict[str, dict[int, tuple[str, float, str]]] = {}  # group -> tid -> reading
        self.samples: list[dict] = []
        self.start = time.monotonic()

    def _groups(self) -> list[str]:
        ours = descendants(self.root_pid)
        out = []
        for prefix in os.listdir(self.limit_dir):
            m = _PREFIX.match(prefix)
            path = os.path.join(self.limit_dir, prefix)
            if not m or not os.path.isdir(path):
                continue
            if int(m.group(1)) in ours or prefix in {g.split("/")[0] for g in self.threads}:
                out += [f"{prefix}/{host}" for host in os.listdir(path)
                        if os.path.isdir(os.path.join(path, host))]
        return out

    def sample(self) -> None:
        for group in self._groups():
            try:
                with open(os.path.join(self.limit_dir, group, self.thread_file)) as f:
                    tids = [int(t) for t in f.read().split()]
            except OSError:
                continue
            known = self.threads.setdefault(group, {})
            for tid in tids:
                pid = _tgid(tid)
                reading = thread_reading(pid, tid) if pid else None
                if reading is not None:
                    known[tid] = reading
        self.samples.append({"t": round(time.monotonic() - self.start, 3),
                             "groups": {g: self.by_kind(g) for g in self.threads}})

    def by_kind(self, group: str) -> dict[str, float]:
        out = dict.fromkeys(KINDS, 0.0)
        for kind, cpu, _ in self.threads[group].values():
            out[kind] += cpu
        return {k: round(v, 3) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    hierarchy, missing = find_hierarchy()
    if hierarchy is None:
        raise SystemExit(f"thread_cpu: {missing}")
    thread_file = "tasks" if hierarchy.version == 1 else "cgroup.threads"
    proc = subprocess.Popen(args.command)
    sampler = Sampler(proc.pid, hierarchy.limit, thread_file)
    try:
        while proc.poll() is None:
            sampler.sample()
            time.sleep(args.interval)
    except KeyboardInterrupt:
        proc.terminate()  # only the process this tool started, by its id
        proc.wait()
    with open(args.out, "w") as f:
        json.dump({"command": args.command, "interval_s": args.interval,
                   "samples": sampler.samples,
                   "threads": {g: {str(t): list(r) for t, r in ts.items()}
                               for g, ts in sampler.threads.items()}}, f)
    return proc.returncode or 0


if __name__ == "__main__":
    raise SystemExit(main())
