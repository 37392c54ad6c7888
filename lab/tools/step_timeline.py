"""What does each device and link do during a PS-mode step on budgeted devices?

Runs one PS-mode setting of the bench (plain PS, RALP-H or RALP-N) on a simulated cluster of
budgeted devices and, while its measured steps run, samples every task's link counters (from
``/proc/<pid>/net/dev``, the task's own network namespace) and its control group's CPU counter
every ``--interval`` seconds. Reports, per task, the share of the window its link carried data
each way and its device was busy, and for each worker the states it spent its time in:
computing, pulling, pushing, or waiting with its device and link idle. Writes JSON (every
sample) and a picture of a few steps: one row per task, its link's rate each way as a share of
the link's rate and its CPU as a share of its budget.

    .venv/bin/python -m lab.tools.step_timeline --model resnet50 --mode ralp-n --devices 8 \\
        --bandwidth 500mbit \\
        --out lab/results/step-timeline/step_timeline_resnet50_ralpn_n8_500mbit.json \\
        --plot lab/results/step-timeline/step_timeline_resnet50_ralpn_n8_500mbit.png
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ACTIVE = 0.02  # a link direction carries data at this share of its rate or more (above control traffic)
BUSY = 0.5  # a device is busy when it uses this share of its budget or more


def measured_steps(cluster_spec, run) -> dict:
    """In the coordinator: place, warm up, run the measured steps; their end times (the
    same clock as the sampler's: CLOCK_MONOTONIC)."""
    from ralp.bench.ps_job import SetupClock, dataset_fn_for, placed_trainer

    trainer = placed_trainer(cluster_spec, run, SetupClock())
    data = dataset_fn_for(run)
    trainer.fit(data, steps_per_epoch=run.warmup_steps, batch_size=run.batch_size,
                verbose=0)
    start = time.perf_counter()
    history = trainer.fit(data, steps_per_epoch=run.measured_steps,
                          batch_size=run.batch_size, verbose=0)
    return {"start": start, "end_times": list(history.step_end_times),
            "offloaded": list(trainer.plan.offloaded)}


def _net_bytes(pid: int) -> tuple[int, int]:
    """(rx, tx) bytes of every interface but loopback in process ``pid``'s namespace."""
    rx = tx = 0
    with open(f"/proc/{pid}/net/dev") as f:
        for line in f.readlines()[2:]:
            name, values = line.split(":", 1)
            if name.strip() != "lo":
                fields = values.split()
                rx, tx = rx + int(fields[0]), tx + int(fields[8])
    return rx, tx


def _first_pid(directory: str) -> int | None:
    with open(os.path.join(directory, "cgroup.procs")) as f:
        pids = f.read().split()
    return int(pids[0]) if pids else None


class Sampler(threading.Thread):
    """Reads every task's link and CPU counters each ``interval`` seconds until stopped."""

    def __init__(self, meter, interval: float):
        super().__init__(daemon=True)
        from ralp.emulation.cpu_meter import read_group

        self._read_group, self.meter, self.interval = read_group, meter, interval
        self.tasks = [(t, n) for t, n in meter.groups if not t.startswith("chief")
                      and not t.startswith("pace")]
        self.samples: list[list] = []  # [time, {task: [rx, tx, cpu_s]}]
        self._stop_event = threading.Event()

    def run(self) -> None:
        pids: dict[str, int] = {}
        while not self._stop_event.is_set():
            row = {}
            for task, name in self.tasks:
                if task not in pids:
                    pid = _first_pid(os.path.join(self.meter.hierarchy.usage, name))
                    if pid is None:
                        continue
                    pids[task] = pid
                try:
                    rx, tx = _net_bytes(pids[task])
                except OSError:
                    continue
                row[task] = [rx, tx, self._read_group(self.meter.hierarchy, name).used_s]
            self.samples.append([time.perf_counter(), row])
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def rates(samples: list[list], start: float, end: float, link_bps: float,
          budget: float) -> dict[str, list[list[float]]]:
    """Per task, per interval inside [start, end]: [t, rx share of the link's rate, tx share,
    CPU share of the budget]."""
    inside = [s for s in samples if start <= s[0] <= end]
    out: dict[str, list[list[float]]] = {}
    for a, b in zip(inside, inside[1:], strict=False):
        dt = b[0] - a[0]
        for task, (rx1, tx1, c1) in b[1].items():
            if task not in a[1]:
                continue
            rx0, tx0, c0 = a[1][task]
            out.setdefault(task, []).append([
                a[0] - start, 8 * (rx1 - rx0) / dt / link_bps, 8 * (tx1 - tx0) / dt / link_bps,
                (c1 - c0) / dt / budget])
    return out


def states(series: list[list[float]]) -> dict[str, float]:
    """Shares of the window a task spent: busy alone, busy while its link carried data,
    pulling (receiving) alone, pushing (sending) alone, both ways, and idle."""
    counts = dict.fromkeys(("busy", "busy+link", "rx", "tx", "rx+tx", "idle"), 0)
    for _, rx, tx, cpu in series:
        r, s, c = rx >= ACTIVE, tx >= ACTIVE, cpu >= BUSY
        key = ("busy+link" if r or s else "busy") if c else (
            "rx+tx" if r and s else "rx" if r else "tx" if s else "idle")
        counts[key] += 1
    total = max(len(series), 1)
    return {k: round(v / total, 3) for k, v in counts.items()}


def summary(series: list[list[float]]) -> dict[str, float]:
    return {"rx_util": round(statistics.fmean(r[1] for r in series), 3),
            "tx_util": round(statistics.fmean(r[2] for r in series), 3),
            "budget_use": round(statistics.fmean(r[3] for r in series), 3),
            **states(series)}


def cycles(ends: list[float], workers: int) -> dict:
    """A worker's step time per cycle (each ``workers`` steps seen finished), the first cycle
    and the mean of the later ones: the window starts with every worker at once (an epoch of
    its own, as the sweep's records were measured), and the first cycles carry that start.
    Whole cycles only: where the workers keep in step, their steps finish in bunches."""
    marks = [0.0] + ends[workers - 1::workers]
    spans = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    later = (marks[-1] - marks[1]) / (len(spans) - 1) if len(spans) > 1 else None
    return {"cycle_s": [round(x, 3) for x in spans], "first_cycle_s": round(spans[0], 3),
            "later_cycle_s": None if later is None else round(later, 3)}


def plot(per_task: dict, end_times: list[float], seconds: float, path: str, title: str) -> None:
    from matplotlib.figure import Figure

    tasks = sorted(per_task, key=lambda t: (not t.startswith("ps"), t))
    fig = Figure(figsize=(12, 1.3 * len(tasks) + 1), layout="constrained")
    axes = fig.subplots(len(tasks), 1, sharex=True)
    for ax, task in zip(axes, tasks, strict=True):
        rows = [r for r in per_task[task] if r[0] <= seconds]
        t = [r[0] for r in rows]
        ax.fill_between(t, [r[3] for r in rows], step="post", color="0.8", label="CPU / budget")
        ax.step(t, [r[1] for r in rows], where="post", color="tab:blue", lw=1,
                label="received / link rate")
        ax.step(t, [r[2] for r in rows], where="post", color="tab:red", lw=1,
                label="sent / link rate")
        for e in end_times:
            if e <= seconds:
                ax.axvline(e, color="k", lw=0.5, ls=":")
        ax.set_ylim(0, 1.15)
        ax.set_ylabel(task, fontsize=8)
    axes[0].legend(fontsize=7, ncol=3, loc="upper right")
    axes[-1].set_xlabel("seconds into the measured window (dotted: a step seen finished)")
    fig.suptitle(title, fontsize=9)
    fig.savefig(path, dpi=110)


def measure(args) -> dict:
    """Run the setting on a fresh budgeted cluster, sampling while its steps run."""
    from ralp._cli import quiet_tensorflow
    from ralp.bench.launcher import Launcher
    from ralp.bench.runspec import RunSpec
    from ralp.cluster.fresh_process import run_in_fresh_process
    from ralp.units import parse_bandwidth

    quiet_tensorflow()
    run = RunSpec.for_devices(args.model, args.mode, args.devices, image_size=args.image_size,
                              batch_size=args.batch_size, steps=args.steps)
    launcher = Launcher("netns", bandwidth=args.bandwidth)
    launcher.check()
    budget = launcher.budget("auto", args.devices)
    with launcher.cluster(run.workers, run.ps, False, budget) as handle:
        sampler = Sampler(handle.read_cpu, args.interval)
        sampler.start()
        try:
            job = run_in_fresh_process(measured_steps, handle.spec, run, netns=handle.netns,
                                       group=handle.chief_group, timeout=3600,
                                       env={"CUDA_VISIBLE_DEVICES": "-1"})
        finally:
            sampler.stop()
    start, end = job["start"], job["end_times"][-1]
    per_task = rates(sampler.samples, start, end, float(parse_bandwidth(args.bandwidth)),
                     budget.cpus)
    return {
        "command": " ".join(["python -m lab.tools.step_timeline", *sys.argv[1:]]),
        "run": run.label, "workers": run.workers, "bandwidth": args.bandwidth,
        "budget_cpus": budget.cpus, "interval_s": args.interval,
        "window_s": round(end - start, 3),
        "step_ends_s": [round(e - start, 3) for e in job["end_times"]],
        "worker_step_s": round(run.workers * (end - start) / run.measured_steps, 3),
        "series": {task: [[round(x, 4) for x in r] for r in series]
                   for task, series in per_task.items()},
    }


def summarize(result: dict) -> dict:
    """The figures read off the samples and step ends (recomputed by ``--show``)."""
    return {**result, **cycles(result["step_ends_s"], result["workers"]),
            "tasks": {task: summary(series) for task, series in sorted(result["series"].items())}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--mode", default="ralp-n", choices=["ps", "ralp-h", "ralp-n"])
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--bandwidth", default="500mbit")
    p.add_argument("--image-size", type=int, default=75)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=4, help="measured steps per worker")
    p.add_argument("--interval", type=float, default=0.02, help="sampling interval, seconds")
    p.add_argument("--plot-seconds", type=float, default=40.0)
    p.add_argument("--out", help="write the samples and figures here (JSON)")
    p.add_argument("--show", help="read a saved JSON instead of running: print it, --plot it")
    p.add_argument("--plot")
    args = p.parse_args()
    if not (args.out or args.show):
        p.error("give --out (run and save) or --show (read a saved run)")
    result = summarize(json.loads(Path(args.show).read_text()) if args.show else measure(args))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"{result['run']}: window {result['window_s']} s, a worker's step "
          f"{result['worker_step_s']} s (first cycle {result['first_cycle_s']} s, later ones "
          f"{result['later_cycle_s']} s); shares of the window:")
    for task, s in result["tasks"].items():
        print(f"  {task:9s} " + ", ".join(f"{k} {v:.2f}" for k, v in s.items()))
    if args.plot:
        ends = result["step_ends_s"]
        plot(result["series"], ends, args.plot_seconds, args.plot,
             f"{result['run']} at {result['bandwidth']}, {result['budget_cpus']:.3f} CPU per "
             "device: per task, its link each way (share of the rate) and its CPU (share of "
             "the budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
