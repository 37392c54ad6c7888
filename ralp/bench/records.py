"""The bench's record: one plain dict per run, the same schema for every producer.

Producers (the PS job, the Horovod rank job, consolidation jobs, failed runs) hand their
figures to :func:`make_record`, which lays them out in :data:`RECORD_KEYS` order, fills what a
producer did not measure with None, and refuses figures the schema does not know. Figures
derived from a record (measured/predicted bytes, the wire time of a step, speedups) are computed here too. No TensorFlow, no matplotlib: re-reading saved JSON is
quick.
"""

from __future__ import annotations

from collections.abc import Mapping

from ralp import modes as registry
from ralp.errors import RalpError

# The run's identity (RunSpec fields and where it ran: ``bandwidth`` and ``latency`` are the
# nominal link, as asked), then its figures.
SPEC_KEYS: tuple[str, ...] = (
    "model", "mode", "devices", "workers", "ps", "backend", "bandwidth", "latency", "device_cpus",
    "job",
    "batch_size", "image_size", "num_classes", "data", "sync", "slow_worker", "pull_schedule",
    "steps", "warmup",
)
FIGURE_KEYS: tuple[str, ...] = (
    "images_per_sec", "images_per_sec_iqr", "step_time_s", "step_time_iqr_s",
    "bytes_per_step_measured", "bytes_per_step_predicted", "bytes_ratio",
    "ps_bytes_per_step_measured", "ps_bytes_per_step_predicted",
    "compute_step_time_s", "wire_step_time_s", "cpu_step_time_s", "bound_step_time_s",
    "bound_ratio",
    "sync_max_gap", "sync_waiting_s",
    "speedup_vs_ps", "speedup_vs_horovod", "host_kept_up",
    # the simulated cluster in the reference device's time (ralp.bench.pace): the figures
    # above are in its time where ``dilation`` is set, the host's beside them
    "reference_device", "device_pace", "dilation", "applied_bandwidth", "applied_latency",
    "device_pace_after", "pace_drift", "pace_held",
    "host_images_per_sec", "host_step_time_s", "error",
)
RECORD_KEYS: tuple[str, ...] = SPEC_KEYS + FIGURE_KEYS
# Further fields, after the schema's in CSV: what a job reports beyond the table's figures.
EXTRA_KEYS: tuple[str, ...] = (
    "seed", "device_type", "setup_s", "setup", "offloaded_layers", "split_after",
    "profiler_verdict", "skewness", "wall_s", "measured_steps", "final_loss", "busiest_link",
    "busiest_link_bytes", "busiest_link_one_way_bytes", "busiest_direction",
    "busiest_direction_bytes", "links", "scenario",
    "trunk_bytes_measured", "trace_pulls", "pull_batches", "pull_predicted_s",
    "pull_hidden_share", "pull_active_s", "traced_step_s", "control_bytes_per_s",
    "ps_control_bytes_per_s", "auto", "calibration", "cpu", "busiest_cpu_task", "round",
    "window", "pace_probe",
)

BASELINE_MODE = registry.PS
# Fields a record must share with a plain-PS record to be compared with it: the same workload
# on the same network. Consolidation jobs (``job`` set) are compared only with each other.
SPEEDUP_KEY = ("model", "devices", "num_classes", "image_size", "data", "backend", "bandwidth",
               "slow_worker", "device_cpus", "round")
class RecordError(RalpError, ValueError):
    """A producer handed figures the record schema does not know."""


def make_record(spec: Mapping, where: Mapping, figures: Mapping | None = None,
                error: str | None = None) -> dict:
    """One record: the run's ``spec`` fields (RunSpec.to_dict()), ``where`` it ran (backend,
    bandwidth, job, scenario...), and its ``figures`` or ``error``. Unknown keys are an error."""
    given = {**spec, **where, **(figures or {})}
    unknown = [k for k in given if k not in RECORD_KEYS and k not in EXTRA_KEYS]
    if unknown:
        raise RecordError(f"not in the bench record schema: {unknown} (ralp/bench/records.py)")
    record = {k: given.get(k) for k in RECORD_KEYS}
    record.update((k, given[k]) for k in EXTRA_KEYS if k in given)
    record["error"] = error
    return record


def derived_figures(record: Mapping, bits_per_s: float | None) -> dict:
    """Measured/predicted bytes, and the wire time of a step: the busiest link direction's
    bytes over the measured window at the link's rate, per step (``workers`` worker
    batches, as ``step_time_s``). A direction carries at most rate x window, so this never
    exceeds the step time."""
    measured, predicted = record["bytes_per_step_measured"], record["bytes_per_step_predicted"]
    out = {"bytes_ratio": measured / predicted if measured is not None and predicted else None,
           "wire_step_time_s": None}
    if bits_per_s and record.get("busiest_direction_bytes") is not None:
        seconds = record["busiest_direction_bytes"] * 8 / bits_per_s
        out["wire_step_time_s"] = seconds * record["workers"] / record["measured_steps"]
    return out


def consolidated(r: Mapping) -> bool:
    return r.get("job") is not None


def succeeded(r: Mapping) -> bool:
    return not r.get("error") and r.get("images_per_sec") is not None


def _speedup_key(r: Mapping) -> tuple:
    return (*(r.get(k) for k in SPEEDUP_KEY), consolidated(r))


def add_speedups(records: list[dict]) -> list[dict]:
    """Fill ``speedup_vs_ps`` and ``speedup_vs_horovod`` in place (and return ``records``).

    The reference is the first successful ``ps`` (``horovod``) record with the same
    :data:`SPEEDUP_KEY` (solo runs and consolidation jobs are never mixed); None where there
    is none, or for a failed record.
    """
    for mode, key in ((BASELINE_MODE, "speedup_vs_ps"),
                      (registry.HOROVOD, "speedup_vs_horovod")):
        baseline: dict[tuple, float] = {}
        for r in records:
            if r.get("mode") == mode and succeeded(r) and r["images_per_sec"] > 0:
                baseline.setdefault(_speedup_key(r), r["images_per_sec"])
        for r in records:
            ref = baseline.get(_speedup_key(r))
            r[key] = r["images_per_sec"] / ref if ref and succeeded(r) else None
    return records


def cpus_label(r: dict) -> str:
    """What a record's devices computed with: '0.425 CPU/device', 'shared CPUs', or ''; a
    budget asked by a device watcher's word adds it ('0.425 CPU/device, paced')."""
    cpu = r.get("cpu") or {}
    if cpu.get("fallback"):
        return "shared CPUs (no budgets)"
    if cpu.get("budget_cpus") is not None:
        asked = str(r.get("device_cpus") or "auto")
        word = asked not in ("auto", "shared") and not asked.replace(".", "", 1).isdigit()
        return f"{cpu['budget_cpus']:g} CPU/device" + (f", {asked}" if word else "")
    return "shared CPUs" if r.get("device_cpus") == "shared" else ""


ERROR_CHARS = 4000  # what a record keeps of an error's message, at most
SHORT_ERROR_CHARS = 300  # an error in a table's row


def error_text(error: BaseException | str) -> str:
    """What a record keeps of an error: its whole message (every line), ``ERROR_CHARS`` at
    most; of a longer one its start and its end (where a Python error's own line is), with
    how much was left out between."""
    text = str(error).strip() or (type(error).__name__ if isinstance(error, BaseException)
                                  else "failed")
    if len(text) <= ERROR_CHARS:
        return text
    half = (ERROR_CHARS - 50) // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def short_error(error: BaseException | str) -> str:
    """An error in one line, for a table: its first line and, where that line only opens
    what follows (it ends with ':', as TensorFlow's "in user code:"), its last line too;
    ``SHORT_ERROR_CHARS`` at most."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__ if isinstance(error, BaseException) else "failed"
    text = lines[0]
    if len(lines) > 1 and text.endswith(":"):
        text = f"{text} ... {lines[-1]}"
    return text[:SHORT_ERROR_CHARS]
