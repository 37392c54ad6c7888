"""Mode "auto": the planner's choice among the modes the runtime offers, and why.

``ralp.wrap(model, cluster, mode="auto", bandwidth="10gbit")`` and ``python -m ralp.bench
--modes auto`` resolve "auto" once, before anything runs: each candidate mode's throughput is
predicted from a calibration and the byte model (:mod:`ralp.planner.predict`) and the fastest
is chosen. The choice keeps its reasons (:class:`AutoChoice`): every candidate's predicted
images/s and the calibration they came from. The paper's rule, the skewness screen, stays
available as mode "skewness" (``ralp.wrap``'s default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_THRESHOLD
from ralp.planner.calibration import Calibration, this_machine
from ralp.planner.model import Host
from ralp.planner.modes import PlannerError
from ralp.planner.predict import Prediction, predict_on
from ralp.planner.workload import Workload
from ralp.units import parse_bandwidth

# ralp.wrap's modes on the user's cluster -> the planner's model of each on that shape (RALP
# runs the same step whether the cluster was sized as RALP-H or RALP-N: one PS critical section).
WRAP_CANDIDATES: dict[str, str] = {"ps": "ps", "ralp": "ralp-n"}
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")


@dataclass(frozen=True)
class AutoChoice:
    """What "auto" resolved to, and why: the fastest predicted candidate."""

    mode: str  # the chosen mode, as the runtime names it
    devices: int
    bandwidth: str
    predicted_images_per_sec: dict[str, float]  # every candidate, in the order tried
    calibration: str  # where the compute figures came from (file or "measured here") and host

    @property
    def why(self) -> str:
        ranked = sorted(self.predicted_images_per_sec.items(), key=lambda kv: -kv[1])
        figures = ", ".join(f"{m} {v:.1f}" for m, v in ranked)
        return (f"auto chose {self.mode}: predicted images/s on {self.devices} devices at "
                f"{self.bandwidth}: {figures} (calibration: {self.calibration})")  # fmt: skip

    def to_dict(self) -> dict:
        """The bench record's ``auto`` field."""
        return {"chosen": self.mode, "predicted_images_per_sec": dict(self.predicted_images_per_sec),
                "calibration": self.calibration, "why": self.why}  # fmt: skip


def choose(predictions: Sequence[Prediction], bandwidth: str, calibration: str,
           names: dict[str, str] | None = None) -> AutoChoice:  # fmt: skip
    """The fastest of ``predictions`` (one setting; the first listed wins a tie). ``names``
    maps a prediction's mode to the runtime's name of it (``ralp.wrap``: ralp-n -> ralp)."""
    if not predictions:
        raise PlannerError("auto has no candidate mode to choose from on this cluster")
    if len({(p.devices, p.bandwidth_bits) for p in predictions}) != 1:
        raise PlannerError("auto chooses within one setting (devices, bandwidth) at a time")
    names = names or {}
    best = max(predictions, key=lambda p: p.images_per_sec)  # max keeps the first of equals
    return AutoChoice(names.get(best.mode, best.mode), best.devices, bandwidth,
                      {names.get(p.mode, p.mode): p.images_per_sec for p in predictions},
                      calibration)  # fmt: skip


def describe(calibration: Calibration, source: str) -> str:
    """The calibration, as a choice cites it: its source and the host it describes."""
    h = calibration.host
    host = (f"shared host, capacity {h.capacity:.2f}" if h.shared
            else "a task per machine")  # fmt: skip
    return f"{source}, {calibration.machine or 'unknown machine'}, {host}"


def _on_this_host(cluster) -> bool:
    """Every task of ``cluster`` on loopback: a simulated cluster sharing this host's cores."""
    return all(a.rpartition(":")[0] in LOOPBACK_HOSTS for _, _, a in cluster.tasks(True))


def _calibrate_here(clone, cluster, batch_size: int) -> tuple[Calibration, str]:
    """A calibration measured in this process, before it connects to ``cluster``. On separate
    machines only the model's compute counts (plain PS and RALP there use no host figures).
    On a cluster sharing this host, how its tasks contend is measured in fresh processes,
    which a coordinator (itself a daemon process) cannot start."""
    import multiprocessing

    from ralp.planner.api import calibrate, calibrate_entry

    if not _on_this_host(cluster):
        return Calibration(Host(False), [calibrate_entry(clone, batch_size)], this_machine()), (
            "measured here")
    if multiprocessing.current_process().daemon:
        raise PlannerError(
            "mode='auto' on a cluster sharing this host (every task on loopback) needs the "
            "host's contention measured in processes of their own, which this coordinator "
            "process cannot start: pass calibration= (ralp.calibrate(model, batch_size=B, "
            "shared_host=True) run in the launching process, or a JSON from python -m "
            "ralp.plan --calibrate --shared-host)"
        )
    return calibrate(clone, batch_size, shared_host=True), "measured here"


def choose_for_cluster(model, cluster, bandwidth: str, calibration: Calibration | str | None,
                       *, batch_size: int = DEFAULT_BATCH_SIZE,
                       threshold: float = DEFAULT_THRESHOLD) -> AutoChoice:  # fmt: skip
    """Plain PS or RALP for ``model`` on ``cluster`` (its own workers and PS tasks) with links
    at ``bandwidth``. ``calibration``: a :class:`Calibration`, a calibration JSON path, or
    None to measure the model here first (a few steps of a clone). A calibration lacking this
    model is completed here, on its host description."""
    import keras

    from ralp.planner.api import calibrate_entry, shape_facts
    from ralp.profiler.api import profile

    bits = parse_bandwidth(bandwidth)
    image, classes = shape_facts(model)
    # Timing trains: a clone (same layers, fresh weights) keeps the user's weights untouched.
    clone = keras.models.clone_model(model)
    if calibration is None:
        cal, source = _calibrate_here(clone, cluster, batch_size)
    elif isinstance(calibration, (str, Path)):
        cal, source = Calibration.load(calibration), str(calibration)
    else:
        cal, source = calibration, "given"
    try:
        entry = cal.find(model.name, batch_size, image, classes)
    except PlannerError:
        entry = calibrate_entry(clone, batch_size)
        cal = replace(cal, entries=[*cal.entries, entry])
        source += f" (+ {model.name} measured here)"
    workload = Workload(profile(model, batch_size, threshold=threshold))
    workers, ps = len(cluster.workers), len(cluster.ps)
    host = entry.host_for(cal.host)
    predictions = [predict_on(workload, entry.compute, host, planned, workers, ps, bits)
                   for planned in WRAP_CANDIDATES.values()]  # fmt: skip
    names = {planned: mode for mode, planned in WRAP_CANDIDATES.items()}
    return choose(predictions, bandwidth, describe(replace(cal, host=host), source), names)


def wrap(model, cluster, *, mode: str = "skewness", bandwidth: str | None = None,
         calibration: Calibration | str | None = None, **options):  # fmt: skip
    """``ralp.wrap``: place ``model`` on ``cluster`` and return a trainer
    (:func:`ralp.ps_strategy.trainer.wrap` has every other option).

    ``mode="auto"`` predicts plain PS and RALP on this cluster with links at ``bandwidth``
    ('10gbit', required) from ``calibration`` (a :class:`Calibration` or its JSON path; None:
    measured here first, see :func:`_calibrate_here`) and trains the faster; ``trainer.auto`` says what was chosen and why.
    The other modes ("skewness", the paper's rule and the default; "ralp"; "ps") pass through.
    """
    from ralp.ps_strategy.trainer import wrap as place

    if mode != "auto":
        if bandwidth is not None or calibration is not None:
            raise ValueError(f"bandwidth= and calibration= are for mode='auto' (the planner's "
                             f"choice); mode {mode!r} does not use them")  # fmt: skip
        return place(model, cluster, mode=mode, **options)
    if options.get("plan") is not None:
        raise ValueError("mode='auto' chooses between plain PS and RALP at the profiler's "
                         "split; a plan= is a RALP placement: pass mode='ralp' with it")  # fmt: skip
    if bandwidth is None:
        raise ValueError("mode='auto' predicts each mode's throughput, which needs the links' "
                         "rate: pass bandwidth= ('1gbit', '10gbit'), or use mode='skewness' "
                         "for the paper's rule")  # fmt: skip
    keras_model = model.unwrap() if hasattr(model, "unwrap") else model
    choice = choose_for_cluster(keras_model, cluster, bandwidth, calibration,
                                batch_size=options.get("batch_size", DEFAULT_BATCH_SIZE),
                                threshold=options.get("threshold", DEFAULT_THRESHOLD))  # fmt: skip
    trainer = place(model, cluster, mode=choice.mode, **options)
    trainer.auto = choice
    return trainer
