"""What every rank of a Horovod or collective bench job shares: its command line, and a
``main`` that reads it, runs the job and sends the record (or the error) to the launcher
(:mod:`ralp._messages`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from ralp._messages import emit

CONTROL_WINDOW_S = 1.0  # idle seconds over which the control plane's rate is measured


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
    error (the whole message, bounded as a record keeps it). 0, or 1 after an error."""
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
    from ralp.emulation.cpu_meter import DeviceMeter

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
    except Exception as e:  # the record keeps this message; the traceback goes to stderr
        import traceback

        from ralp.bench.records import error_text

        traceback.print_exc()
        emit("error", error_text(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__))
        return 1
    if figures is not None:
        emit("record", figures)
    return 0


def measured_window(stepper, run, rank: int, read_links, read_cpu, say) -> dict:
    """Run the measured steps on this rank; rank 0 reads the link and CPU counters at their
    edges (behind barriers, so every rank's traffic is inside the window) and once more after
    an idle window: the allreduce libraries coordinate every cycle, tensors or not, a
    time-proportional control plane the byte model (payload) does not count, so every rank
    idles for the same window and rank 0 measures its rate on each link."""
    from ralp.bench.measure import PROGRESS_EVERY

    say("phase", "measuring")
    before = dict(read_links()) if read_links and rank == 0 else None
    cpu_before = read_cpu() if read_cpu and rank == 0 else None
    start = time.perf_counter()

    def on_step(k: int) -> None:
        if (k + 1) % PROGRESS_EVERY == 0:
            say("step", (k + 1) * run.workers)  # worker batches done, as the PS modes count

    history = stepper.run(run.steps, on_step)
    stepper.barrier()
    cpu_after = read_cpu() if read_cpu and rank == 0 else None
    after = dict(read_links()) if read_links and rank == 0 else None
    idle = None
    if read_links:
        time.sleep(CONTROL_WINDOW_S)
        idle = dict(read_links()) if rank == 0 else None
        stepper.barrier()
    return {"history": history, "start": start, "before": before, "after": after,
            "idle": idle, "cpu_before": cpu_before, "cpu_after": cpu_after}


def window_figures(run, window: dict) -> dict:
    """Rank 0's figures of the measured window: timing, bytes on each link (and the control
    plane's rate), CPU. All ranks finish a step together (a collective): one end time per
    worker batch."""
    from ralp.bench.measure import (
        control_plane_figures,
        cpu_window,
        link_figures,
        timing,
        wire_figures,
    )

    history, start, steps = window["history"], window["start"], run.measured_steps
    end_times = [t for t in history.step_end_times for _ in range(run.workers)]
    control = ({} if window["idle"] is None else
               control_plane_figures(window["after"], window["idle"], CONTROL_WINDOW_S))
    return {
        "wall_s": history.step_end_times[-1] - start,
        "measured_steps": steps,
        **timing(end_times, start, steps, run.workers, run.batch_size),
        **link_figures(window["before"], window["after"], steps),
        **wire_figures(window["before"], window["after"]),
        **control,
        **cpu_window(window["cpu_before"], window["cpu_after"]),
    }
