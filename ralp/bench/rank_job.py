"""What every rank of a Horovod or collective bench job shares: its command line, and a
``main`` that reads it, runs the job and sends the record (or the error) to the launcher
(:mod:`ralp._messages`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from ralp._messages import emit


def rank_command(module: str, run, links=None, started: float | None = None,
                 cpu=None) -> list[str]:
    """The command every rank runs for ``run`` (``python -m module``); ``links`` a TaskLinks on
    the netns backend, ``cpu`` a DeviceMeter where the ranks have device budgets."""
    command = [sys.executable, "-m", module,
               "--spec", json.dumps(run.to_dict(), separators=(",", ":"))]
    if links is not None:
        fields = {"switch_namespace": links.switch_namespace, "hosts": [list(h) for h in links.hosts]}
        command += ["--links", json.dumps(fields, separators=(",", ":"))]
    if cpu is not None:
        command += ["--cpu", cpu.to_json()]
    if started is not None:
        command += ["--started", repr(started)]
    return command


def rank_main(prog: str, job: Callable, argv: list[str] | None = None,
              before: Callable[[], None] | None = None) -> int:
    """Parse :func:`rank_command`'s arguments, call ``before`` (first of all), then
    ``job(run, read_links, started, read_cpu)``; send its figures as the record, or its
    error's first line. 0, or 1 after an error."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--spec", required=True, help="the RunSpec as JSON")
    parser.add_argument("--links", help="netns link counters: TaskLinks fields as JSON")
    parser.add_argument("--started", type=float, help="time.time() when the run was launched")
    parser.add_argument("--cpu", help="the device groups' CPU counters: a DeviceMeter as JSON")
    args = parser.parse_args(argv)
    if before is not None:
        before()
    from ralp._cli import quiet_tensorflow
    from ralp.bench.runspec import RunSpec
    from ralp.emulation.devices import DeviceMeter

    quiet_tensorflow()
    run = RunSpec(**json.loads(args.spec))
    read_links = None
    if args.links:
        from ralp.emulation.counters import TaskLinks

        fields = json.loads(args.links)
        read_links = TaskLinks(fields["switch_namespace"],
                               tuple(tuple(pair) for pair in fields["hosts"]))
    try:
        read_cpu = DeviceMeter.from_json(args.cpu) if args.cpu else None
        figures = job(run, read_links, args.started, read_cpu)
    except Exception as e:  # the bench shows this line; the traceback goes to stderr
        import traceback

        traceback.print_exc()
        emit("error", f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e) else ''}")
        return 1
    if figures is not None:
        emit("record", figures)
    return 0
