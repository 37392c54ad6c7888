"""Running a list of benchmark runs, one fresh cluster and coordinator process each.

Each run gets its own cluster (started and stopped here) and its own coordinator process, so
no run inherits another's servers, variables or traced graphs; a Horovod run gets its own
ranks. A run that fails becomes a record with its error; the runs before and after it still
count.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ralp.bench.calibrated import Calibrations
from ralp.bench.horovod_job import rank_command
from ralp.bench.job import bench_job
from ralp.bench.launcher import Launcher
from ralp.bench.records import (
    add_compute_reference,
    derived_figures,
    make_record,
    reference_key,
    short_error,
)
from ralp.bench.runspec import HOROVOD_MODES, RunSpec
from ralp.cluster.fresh_process import ChildError, run_in_fresh_process
from ralp.cluster.spec import ClusterError
from ralp.horovod.launch import HorovodRunError, launch

RUN_TIMEOUT_S = 3600.0


def bits_per_second(bandwidth: str | None) -> float | None:
    if not bandwidth:
        return None
    from ralp.cluster.units import parse_bandwidth

    return float(parse_bandwidth(bandwidth))


def measure(run: RunSpec, launcher: Launcher, on_progress: Callable | None = None) -> dict:
    """One run on a fresh cluster; a record (with ``error`` set if it failed)."""
    where = {"backend": launcher.backend, "bandwidth": launcher.bandwidth, "job": None}
    try:
        if run.mode in HOROVOD_MODES:  # stanza: ``ps`` counts its FC ranks
            started = time.time()
            figures = launch(
                lambda links: rank_command(run, links, started), run.workers, launcher.backend,
                bandwidth=launcher.bandwidth, latency=launcher.latency,
                hostfile=launcher.hostfile, on_progress=on_progress, timeout=RUN_TIMEOUT_S,
                fc_ranks=run.ps,
            )  # fmt: skip
        else:
            with launcher.cluster(run.workers, run.ps, trace=run.trace_pulls) as handle:
                figures = run_in_fresh_process(
                    bench_job, handle.spec, run, handle.read_links, started=time.time(),
                    profiler_address=handle.profiler_address,
                    netns=handle.netns, on_progress=on_progress, timeout=RUN_TIMEOUT_S,
                    env={"CUDA_VISIBLE_DEVICES": "-1"},  # the coordinator computes nothing
                )  # fmt: skip
                figures["setup"] = {"cluster_start": handle.start_s, **figures["setup"]}
    except (ChildError, ClusterError, HorovodRunError) as e:
        return make_record(run.to_dict(), where, error=short_error(e))
    figures["setup_s"] = round(sum(figures["setup"].values()), 3)
    record = make_record(run.to_dict(), where, figures)
    record.update(derived_figures(record, bits_per_second(launcher.bandwidth)))
    return record


def run_all(
    runs: Sequence[RunSpec],
    launcher: Launcher,
    *,
    compute_reference: bool = False,
    calibrations: Calibrations | None = None,
    progress: bool = True,
    on_record: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Measure every run in order, with a progress bar over all measured steps.
    ``calibrations``: calibrate each workload before its first run (:mod:`ralp.bench.calibrated`)
    and keep it in the workload's records."""
    from tqdm import tqdm

    plan = [(run, launcher) for run in runs]
    if compute_reference and launcher.backend == "netns":
        local = Launcher("local", device_type=launcher.device_type)
        plan += [(run, local) for run in runs]
    total = sum(run.measured_steps for run, _ in plan)
    bar = tqdm(total=total, unit="step", disable=not progress, dynamic_ncols=True)
    records, references = [], {}
    try:
        for run, where in plan:
            done_before = bar.n
            bar.set_description(f"{run.label} [{where.backend}]")

            def on_progress(message, base=done_before):
                kind, value = message
                if kind == "phase":
                    bar.set_postfix_str(value)
                else:
                    bar.update(base + value - bar.n)

            calibration = None
            if calibrations is not None and where is launcher:
                bar.set_postfix_str("calibrating the workload")
                calibration = calibrations.for_run(run)
            record = measure(run, where, on_progress)
            bar.update(done_before + run.measured_steps - bar.n)
            if where is launcher:
                if calibrations is not None:
                    record["calibration"] = calibration
                records.append(record)
                if on_record:
                    on_record(record)
            else:
                references[reference_key(record)] = record
    finally:
        bar.close()
    add_compute_reference(records, references)
    return records
