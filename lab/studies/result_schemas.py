"""The studies' results: one plain dict each, in a schema per experiment (the sync,
Stanza and chaos experiments), laid out as :func:`ralp.bench.records.make_record` lays out a
bench record."""

from __future__ import annotations

from collections.abc import Mapping

from ralp.bench.records import RecordError

# The sync experiment's results (``python -m lab.studies.sync_digits``): one per paradigm,
# a test-accuracy curve over wall time instead of throughput figures.
SYNC_RESULT_KEYS: tuple[str, ...] = (
    "sync", "slow_worker", "mode", "workers", "seed", "backend", "bandwidth", "steps", "batch_size",
    "learning_rate", "wall_s", "iterations_per_s", "curve", "final_accuracy", "max_gap",
    "total_waiting_s", "waiting_s", "steps_per_worker", "dssp_decisions", "slow_delay_s",
    "link_bytes", "error",
)


def make_sync_result(sync: str, where: Mapping, figures: Mapping | None = None,
                     error: str | None = None) -> dict:
    """One paradigm's result of the sync experiment, in :data:`SYNC_RESULT_KEYS` order."""
    return _laid_out({"sync": sync, **where, **(figures or {})}, SYNC_RESULT_KEYS, "sync", error)


# The chaos benchmark (python -m lab.studies.chaos): one result per mode, training through
# killed tasks against a failure-free run of the same seed.
CHAOS_RESULT_KEYS: tuple[str, ...] = (
    "mode", "model", "workers", "ps", "backend", "bandwidth", "batch_size", "optimizer",
    "learning_rate", "schedule", "seed", "repeats",
    "steps_requested", "steps_completed", "steps_redone", "checkpoint_every", "kills",
    "accuracy", "accuracy_failure_free", "wall_s", "wall_s_failure_free", "time_lost_s",
    "failures", "duplicate_steps", "iterations", "restarts", "copy_seconds", "copy_waited_s",
    "save_s", "saves", "save_overhead", "left_running", "runs", "error",
)


def make_chaos_result(mode: str, where: Mapping, figures: Mapping | None = None,
                      error: str | None = None) -> dict:
    """One mode's result of the chaos benchmark, in :data:`CHAOS_RESULT_KEYS` order."""
    return _laid_out({"mode": mode, **where, **(figures or {})}, CHAOS_RESULT_KEYS, "chaos", error)


def _laid_out(given: Mapping, keys: tuple[str, ...], schema: str, error: str | None) -> dict:
    """``given`` in ``keys`` order, what is missing None; a key not in ``keys`` is an error."""
    unknown = [k for k in given if k not in keys]
    if unknown:
        raise RecordError(f"not in the {schema} result schema: {unknown} (lab/studies/result_schemas.py)")
    return {**{k: given.get(k) for k in keys}, "error": error}


# One run of the Stanza accuracy experiment (python -m lab.studies.stanza_accuracy).
STANZA_RESULT_KEYS: tuple[str, ...] = (
    "mode", "workers", "bandwidth", "seed", "batch_size", "learning_rate", "worker_batches",
    "samples_per_s", "wall_s", "final_accuracy", "time_to", "server_link_bytes", "link_bytes",
    "curve", "error",
)


def make_stanza_result(mode: str, where: Mapping, figures: Mapping | None = None,
                       error: str | None = None) -> dict:
    """One run of the Stanza experiment, in :data:`STANZA_RESULT_KEYS` order."""
    return _laid_out({"mode": mode, **where, **(figures or {})}, STANZA_RESULT_KEYS, "stanza",
                     error)
