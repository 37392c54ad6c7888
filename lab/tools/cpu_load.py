"""Run a command on a busier host: CPU-bound processes beside it, together held to a CPU
budget in a control group of their own (or not held: ``--cpus none``), from before the
command starts to after it ends; then say the CPU they used. The group and the processes are
this tool's own, removed and stopped also when the command fails or is interrupted.

    .venv/bin/python -m lab.tools.cpu_load --cpus 0.6 -- .venv/bin/python -m ralp.bench ...
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys

from ralp.emulation.cpu_meter import CpuSnapshot, find_hierarchy
from ralp.emulation.devices import DeviceGroups, new_prefix

LOAD = "load"  # the group's name under the tool's prefix
SPIN = "while True: pass"  # one CPU's worth of work, as long as it runs


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m lab.tools.cpu_load", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpus", required=True,
                   help="CPUs the load may use together (a number), or 'none': not held")
    p.add_argument("--processes", type=int, default=1, help="CPU-bound processes (default 1)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = p.parse_args(argv)
    args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.command:
        p.error("give the command to run after --")
    if args.processes < 1:
        p.error("--processes must be at least 1")
    try:
        args.cpus = None if args.cpus == "none" else float(args.cpus)
    except ValueError:
        p.error(f"--cpus {args.cpus!r}: give a number of CPUs or 'none'")
    return args


def run_beside_load(command: list[str], cpus: float | None, processes: int = 1) -> int:
    """``command``'s exit status, run beside ``processes`` CPU-bound processes held together
    to ``cpus`` CPUs (None: not held, only counted)."""
    hierarchy, missing = find_hierarchy()
    if hierarchy is None:
        raise SystemExit(f"cpu_load: {missing}")
    with DeviceGroups(hierarchy, new_prefix(), (LOAD,), cpus) as groups:
        group = groups.group(LOAD)
        meter = groups.meter({LOAD: LOAD})
        spinners = [subprocess.Popen(group.joined_command([sys.executable, "-c", SPIN]))
                    for _ in range(processes)]
        before = meter()
        try:
            return _wait_passing_signals(subprocess.Popen(command))
        finally:
            used = _cpus_used(before, meter())
            for spinner in spinners:  # only the processes this tool started, by their ids
                spinner.terminate()
            for spinner in spinners:
                spinner.wait()
            held = "not held" if cpus is None else f"held to {cpus:g} CPUs"
            print(f"cpu_load: {processes} CPU-bound process(es) {held} used {used} CPUs "
                  "beside the command", file=sys.stderr)


def _wait_passing_signals(child: subprocess.Popen) -> int:
    """``child``'s exit status; a SIGTERM or SIGINT to this tool is passed on to it (so it
    cleans up as it would), and this tool waits for it to end."""
    def pass_on(signum, frame):
        child.send_signal(signum)

    previous = {s: signal.signal(s, pass_on) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        return child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _cpus_used(before: CpuSnapshot, after: CpuSnapshot) -> str:
    """The load's CPUs between two snapshots of its group's counters."""
    try:
        used = after.tasks[LOAD].used_s - before.tasks[LOAD].used_s
        return f"{used / (after.time - before.time):.2f}"
    except (AttributeError, KeyError, TypeError, ZeroDivisionError):
        return "an unknown number of"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run_beside_load(args.command, args.cpus, args.processes)


if __name__ == "__main__":
    raise SystemExit(main())
