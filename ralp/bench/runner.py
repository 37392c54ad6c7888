"""Running a list of benchmark runs, one fresh cluster and coordinator process each.

Each run gets its own cluster (started and stopped here) and its own coordinator process, so
no run inherits another's servers, variables or traced graphs; a Horovod run gets its own
ranks. A run that fails becomes a record with its error; the runs before and after it still
count.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from ralp.bench.bound import bound_figures
from ralp.bench.calibrated import Calibrations
from ralp.bench.launcher import Launcher
from ralp.bench.pace import Pace, Paces, dilated_link, reference_time_figures
from ralp.bench.records import derived_figures, error_text, make_record
from ralp.bench.runspec import RunSpec
from ralp.cluster.fresh_process import ChildError, run_in_fresh_process
from ralp.cluster.spec import ClusterError
from ralp.collective.launch import launch as collective_launch
from ralp.collective.runtime import CollectiveError
from ralp.emulation.budget import fidelity
from ralp.emulation.cpu_meter import CpuSnapshot
from ralp.errors import InvalidArgumentError
from ralp.horovod.launch import DRIVER, HorovodRunError, launch
from ralp.modes import HOROVOD_RANKS, MODES, TF_WORKERS, load

RUN_TIMEOUT_S = 3600.0
T = TypeVar("T")


def bits_per_second(bandwidth: str | None) -> float | None:
    if not bandwidth:
        return None
    from ralp.units import parse_bandwidth

    return float(parse_bandwidth(bandwidth))


def measure(run: RunSpec, launcher: Launcher, on_progress: Callable | None = None,
            timeout: float = RUN_TIMEOUT_S) -> dict:
    """One run on a fresh cluster; a record (with ``error`` set if it failed)."""
    where = {"backend": launcher.backend, "bandwidth": launcher.bandwidth,
             "latency": launcher.latency, "job": None}
    try:
        budget = launcher.budget(run.device_cpus, run.devices)
        mode = MODES[run.mode]
        job = load(mode.bench_job)
        if mode.launch == HOROVOD_RANKS:  # stanza: ``ps`` counts its FC ranks
            started = time.time()
            figures = launch(
                lambda links, cpu: job(run, links, started, cpu), run.workers,
                launcher.backend, bandwidth=launcher.bandwidth, latency=launcher.latency,
                hostfile=launcher.hostfile, on_progress=on_progress, timeout=timeout,
                fc_ranks=run.ps, budget=budget,
            )
            counted_apart = (DRIVER,)
        elif mode.launch == TF_WORKERS:  # the workers alone; this process starts them
            started = time.time()
            figures = collective_launch(
                lambda links, cpu: job(run, links, started, cpu), run.workers,
                launcher.backend, bandwidth=launcher.bandwidth, latency=launcher.latency,
                budget=budget, on_progress=on_progress, timeout=timeout)
            counted_apart = ()
        else:
            with launcher.cluster(run.workers, run.ps, run.trace_pulls, budget) as handle:
                figures = run_in_fresh_process(
                    job, handle.spec, run, handle.read_links, started=time.time(),
                    profiler_address=handle.profiler_address, read_cpu=handle.read_cpu,
                    netns=handle.netns, group=handle.chief_group, on_progress=on_progress,
                    timeout=timeout, env={"CUDA_VISIBLE_DEVICES": "-1"},  # computes nothing
                )
                figures["setup"] = {"cluster_start": handle.start_s, **figures["setup"]}
            counted_apart = ("chief:0",)
    except (ChildError, ClusterError, HorovodRunError, CollectiveError) as e:
        return make_record(run.to_dict(), where, error=error_text(e))
    figures["setup_s"] = round(sum(figures["setup"].values()), 3)
    if budget is not None:
        window = [CpuSnapshot.from_dict(s) for s in figures.pop("cpu_window", [None, None]) if s]
        figures["cpu"] = fidelity(budget, *(window or [None, None]), unbudgeted=counted_apart)
        figures["host_kept_up"] = figures["cpu"]["kept_up"]
    record = make_record(run.to_dict(), where, figures)
    record.update(derived_figures(record, bits_per_second(launcher.bandwidth)))
    return record


def dilated_launcher(launcher: Launcher, dilation: float) -> Launcher:
    """``launcher`` with its links dilated: rates divided by ``dilation``, delays multiplied."""
    bandwidth, latency = dilated_link(launcher.bandwidth, launcher.latency, dilation)
    return replace(launcher, bandwidth=bandwidth, latency=latency)


def measure_paced(run: RunSpec, launcher: Launcher, pace: Pace | None,
                  on_progress: Callable | None = None) -> dict:
    """:func:`measure` on ``launcher``'s links dilated by ``pace`` (None: as they are), its
    time limit stretched alike; the record says the nominal link, the applied one and the
    pace (its figures still in the host's time)."""
    nominal = {"bandwidth": launcher.bandwidth, "latency": launcher.latency}
    if pace is None:
        return {**measure(run, launcher, on_progress), **nominal}
    record = measure(run, dilated_launcher(launcher, pace.dilation), on_progress,
                     RUN_TIMEOUT_S * max(1.0, pace.dilation))
    return {**record, **nominal, **pace.record_fields(launcher.bandwidth, launcher.latency)}


def run_all(
    runs: Sequence[RunSpec],
    launcher: Launcher,
    *,
    calibrations: Calibrations | None = None,
    paces: Paces | None = None,
    progress: bool = True,
    on_record: Callable[[dict], None] | None = None,
    repeat: int = 1,
) -> list[dict]:
    """Measure every run in order, with a progress bar over all measured steps.
    ``calibrations``: calibrate each workload before its first run in each round
    (:mod:`ralp.bench.calibrated`), keep it in that round's records and read each record
    against its bound (:mod:`ralp.bench.bound`). ``paces``: run each on links dilated by
    its budget's pace in its round, its figures in the reference device's time, the pace
    measured again after the round's runs and each of its records saying whether it held
    (:mod:`ralp.bench.pace`). ``repeat``: the whole
    matrix that many rounds, the order rotated by one each round (:func:`rounds`); each record
    keeps its ``round``."""
    from tqdm import tqdm

    plan = rounds(list(runs), repeat)
    total = sum(run.measured_steps for _, run in plan)
    bar = tqdm(total=total, unit="step", disable=not progress, dynamic_ncols=True)
    records: list[dict] = []
    try:
        for index, (round_index, run) in enumerate(plan):
            done_before = bar.n
            counter = f"round {round_index + 1}/{repeat} " if repeat > 1 else ""
            bar.set_description(f"{counter}{run.label} [{launcher.backend}]")

            def on_progress(message, base=done_before):
                kind, value = message
                if kind == "phase":
                    bar.set_postfix_str(value)
                else:
                    bar.update(base + value - bar.n)

            record = _measure_in_round(run, round_index, launcher, calibrations, paces,
                                       on_progress, bar.set_postfix_str)
            bar.update(done_before + run.measured_steps - bar.n)
            records.append(record)
            if on_record:  # before the probe after the round, which adds to records given
                on_record(record)
            if paces is not None and (index + 1 == len(plan) or plan[index + 1][0] != round_index):
                bar.set_postfix_str("probing the host's pace again")
                _recheck_round(paces, round_index, records, plan[: len(records)])
    finally:
        bar.close()
    return records


def _recheck_round(paces: Paces, round_index: int, records: Sequence[dict],
                   plan: Sequence[tuple[int, RunSpec]]) -> None:
    """After round ``round_index``'s last run: its budgets' paces probed again, and each of
    its ``records`` (one per ``plan`` entry) told whether its budget's pace held."""
    paces.recheck(round_index)
    for record, (k, run) in zip(records, plan, strict=True):
        if k == round_index:
            record.update(paces.held_for_run(run, round_index))


def _measure_in_round(run: RunSpec, round_index: int, launcher: Launcher,
                      calibrations: Calibrations | None, paces: Paces | None,
                      on_progress: Callable, say: Callable[[str], None]) -> dict:
    """One run of round ``round_index``: its budget's pace (links dilated by it), its
    workload's calibration, its record with its bound and its figures in reference time."""
    pace = paces.for_run(run, round_index) if paces is not None else None
    calibration = None
    if calibrations is not None:
        say("calibrating the workload")
        calibration = calibrations.for_run(run, round_index, pace.dilation if pace else None)
    record = measure_paced(run, launcher, pace, on_progress)
    record["round"] = round_index
    if calibrations is not None:
        record["calibration"] = calibration
    record.update(bound_figures(record))
    record.update(reference_time_figures(record, pace.dilation if pace else None))
    return record


def rounds(items: Sequence[T], repeat: int) -> list[tuple[int, T]]:
    """``items`` ``repeat`` times as (round, item), each round's order rotated by one more
    (A B C D, then B C D A, ...), so no item always runs first, last or after the same one
    while the machine drifts."""
    if repeat < 1:
        raise InvalidArgumentError(f"repeat must be >= 1, got {repeat}")
    n = len(items)
    return [(r, items[(r + k) % n]) for r in range(repeat) for k in range(n)]
