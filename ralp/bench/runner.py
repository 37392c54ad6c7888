"""Running a list of benchmark runs, one fresh cluster and coordinator process each.

Each run gets its own cluster (started and stopped here) and its own coordinator process, so
no run inherits another's servers, variables or traced graphs. A run that fails becomes a
record with its error; the runs before and after it still count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ralp.bench.config import RunSpec
from ralp.bench.job import bench_job
from ralp.bench.launcher import Launcher
from ralp.ps_strategy.cluster import ClusterError
from ralp.ps_strategy.fresh_process import ChildError, run_in_fresh_process

RUN_TIMEOUT_S = 3600.0


def bits_per_second(bandwidth: str | None) -> float | None:
    if not bandwidth:
        return None
    from ralp.ps_strategy.netns import parse_bandwidth

    return float(parse_bandwidth(bandwidth))


def measure(run: RunSpec, launcher: Launcher, on_progress: Callable | None = None) -> dict:
    """One run on a fresh cluster; a record (with ``error`` set if it failed)."""
    base = {"backend": launcher.backend, "bandwidth": launcher.bandwidth, "job": None}
    if run.mode == "horovod":
        return _measure_horovod(run, launcher, on_progress, base)
    try:
        with launcher.cluster(run.workers, run.ps) as handle:
            fields = run_in_fresh_process(
                bench_job, handle.spec, run, handle.read_links, netns=handle.netns,
                on_progress=on_progress, timeout=RUN_TIMEOUT_S,
                env={"CUDA_VISIBLE_DEVICES": "-1"},  # the coordinator computes nothing
            )  # fmt: skip
    except (ChildError, ClusterError) as e:
        return {**run.resolved().to_dict(), **base, **_empty_figures(), "error": _short(e)}
    record = {**_empty_figures(), **fields, **base, "error": None}
    record.update(derived_figures(record, bits_per_second(launcher.bandwidth)))
    return record


def _measure_horovod(run: RunSpec, launcher: Launcher, on_progress, base: dict) -> dict:
    from ralp.baselines.horovod_launch import HorovodRunError, run_bench_job

    try:
        fields = run_bench_job(run, launcher.backend, bandwidth=launcher.bandwidth,
                               latency=launcher.latency, hostfile=launcher.hostfile,
                               on_progress=on_progress, timeout=RUN_TIMEOUT_S)  # fmt: skip
    except (HorovodRunError, ClusterError) as e:
        return {**run.resolved().to_dict(), **base, **_empty_figures(), "error": _short(e)}
    record = {**_empty_figures(), **fields, **base, "error": None}
    record.update(derived_figures(record, bits_per_second(launcher.bandwidth)))
    return record


def derived_figures(record: dict, bits_per_s: float | None) -> dict:
    """Measured/predicted bytes, and the network-bound step time on the busiest link."""
    measured, predicted = record["bytes_per_step_measured"], record["bytes_per_step_predicted"]
    out = {"bytes_ratio": measured / predicted if measured is not None and predicted else None,
           "network_step_time_s": None}  # fmt: skip
    if bits_per_s and record.get("busiest_link_bytes") is not None:
        # The busiest link's bytes (both directions) over the measured steps, at its rate,
        # per worker step: "measured bytes / bandwidth" on the bottleneck.
        seconds = record["busiest_link_bytes"] * 8 / bits_per_s
        out["network_step_time_s"] = seconds * record["workers"] / record["measured_steps"]
    return out


def add_compute_reference(records: list[dict], references: dict[tuple, dict]) -> None:
    """Fill ``compute_step_time_s`` (the same run on unshaped loopback) and ``bound_ratio`` =
    step time / max(compute-only step time, network step time)."""
    for r in records:
        ref = references.get(_key(r))
        if r.get("error") or ref is None or ref.get("error"):
            continue
        r["compute_step_time_s"] = ref["step_time_s"]
        bound = max(ref["step_time_s"], r.get("network_step_time_s") or 0.0)
        r["bound_ratio"] = r["step_time_s"] / bound


def run_all(
    runs: Sequence[RunSpec],
    launcher: Launcher,
    *,
    compute_reference: bool = False,
    progress: bool = True,
    on_record: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Measure every run in order, with a progress bar over all measured steps."""
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

            record = measure(run, where, on_progress)
            bar.update(done_before + run.measured_steps - bar.n)
            if where is launcher:
                records.append(record)
                if on_record:
                    on_record(record)
            else:
                references[_key(record)] = record
    finally:
        bar.close()
    add_compute_reference(records, references)
    return records


def _key(record: dict) -> tuple:
    return tuple(record.get(k) for k in ("model", "mode", "devices", "workers", "ps", "batch_size",
                                     "image_size", "num_classes", "data", "sync", "slow_worker"))  # fmt: skip


def _empty_figures() -> dict:
    keys = ("images_per_sec", "images_per_sec_std", "step_time_s", "step_time_std_s",
            "bytes_per_step_measured", "bytes_per_step_predicted", "bytes_ratio",
            "ps_bytes_per_step_measured", "ps_bytes_per_step_predicted", "compute_step_time_s",
            "network_step_time_s", "bound_ratio", "speedup_vs_ps", "speedup_vs_horovod",
            "sync_max_gap", "sync_waiting_s")  # fmt: skip
    return dict.fromkeys(keys)


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__
