"""``python -m ralp.bench --modes auto``: the planner's choice per (model, N), made once when
the run matrix is built (:meth:`ralp.bench.config.BenchRequest.runs`).

The candidates are the modes this runtime offers (horovod and stanza only where Horovod is
installed), each on its own resources for N devices (:mod:`ralp.planner.modes`; stanza with
the n_c / n_f split the planner's search finds best, kept in the record's ``auto``). Their
throughput is predicted by the planner's core (:mod:`ralp.planner.topology`), each device a
machine of its own with its link at the run's rate, from one device's compute: measured on
one device inside the run's budget (:func:`ralp.planner.device.device_entry`; with
``--device-cpus shared``, in one process here), or ``--compute-profile FILE``'s. Where the
run's links are dilated (``--dilation``: the devices' compute against the reference device's),
that compute is taken in the reference device's time, as the run's figures are reported (the
dilation the run's first round applies, measured once for both): the choice is the one the
run's own step, its compute against its slowed links, would make. The run's record keeps the
choice and why in its ``auto`` field.
"""

from __future__ import annotations

from ralp import modes as registry
from ralp.bench.config import ChooseMode
from ralp.bench.pace import Paces
from ralp.bench.runspec import BenchError
from ralp.emulation.budget import budget_for
from ralp.errors import ClusterError
from ralp.modes import HOROVOD_MODES
from ralp.planner.auto import choose, describe
from ralp.planner.calibration import Calibration, Entry
from ralp.planner.cluster_plan import predict_on_devices
from ralp.planner.modes import PREDICTED_MODES, PlannerError
from ralp.planner.terms import Compute
from ralp.planner.workload import Workload
from ralp.units import parse_bandwidth


def offered_modes(horovod_missing: str | None) -> tuple[str, ...]:
    """The runtime's modes the planner predicts, without the Horovod ones (horovod, stanza)
    where Horovod is missing."""
    return tuple(m for m in PREDICTED_MODES if not (m in HOROVOD_MODES and horovod_missing))


def chooser(backend: str, bandwidth: str | None, compute_profile: str | None,
            modes: tuple[str, ...], paces: Paces | None = None) -> ChooseMode:
    """The function that resolves mode auto for one (model, N, workload); ``paces``: the
    run's dilation of its links, if any."""
    if backend != "netns" or not bandwidth:
        raise BenchError("--modes auto predicts each mode on the simulated cluster from its "
                         "links' rate: use the netns backend (as root) with --bandwidth")
    bits = parse_bandwidth(bandwidth)
    loaded = Calibration.load(compute_profile) if compute_profile else None
    measured: dict[tuple, Calibration] = {}

    def calibration_for(key: tuple, devices: int, cpus: str,
                        budget: float | None) -> tuple[Calibration, Entry, str]:
        if loaded is not None:
            return loaded, loaded.find(*key), compute_profile
        if (key, budget) not in measured:
            from ralp.planner.api import calibrate_zoo

            # budgeted: one device inside its budget; shared CPUs: one process here
            measured[key, budget] = calibrate_zoo(
                *key, device_cpus=None if budget is None else cpus, devices=devices)
        cal = measured[key, budget]
        return cal, cal.entries[0], "measured here"

    def choose_mode(model: str, devices: int, workload: dict) -> tuple[str, dict]:
        from ralp.models import build_model, get_model_spec
        from ralp.profiler.api import profile

        spec = get_model_spec(model)
        batch = workload["batch_size"] or spec.default_batch_size
        image = workload["image_size"] or spec.default_image_size
        classes = workload["num_classes"]
        cpus = workload.get("device_cpus", "auto")
        try:
            # None: shared CPUs (asked, or no control group can be made here)
            budget = budget_for(cpus, devices).cpus
            cal, entry, source = calibration_for((model, batch, image, classes), devices, cpus,
                                                 budget)
            work = Workload(profile(build_model(model, classes, image), batch))
            compute, source = _in_reference_time(entry.compute, source, paces, cpus, devices)
            found = _predictions(work, compute, devices, bits, modes)
        except (PlannerError, ClusterError) as e:
            raise BenchError(f"--modes auto, {model} N={devices}: {e}") from None
        picked = choose(found, bandwidth, describe(cal, source))
        why = picked.to_dict()
        if picked.mode == registry.STANZA:  # the FC ranks of the split the search chose
            why["fc_workers"] = next(p.ps for p in found if p.mode == registry.STANZA)
        return picked.mode, why

    return choose_mode


def _in_reference_time(compute: Compute, source: str, paces: Paces | None, cpus: str,
                       devices: int) -> tuple[Compute, str]:
    """``compute`` (one device's, in the host's time) in the reference device's time where the
    run dilates its links: divided by the dilation of the run's first round."""
    pace = paces.of(cpus, devices) if paces is not None else None
    if pace is None:
        return compute, source
    where = f"{source}, in the reference device's time (dilation {pace.dilation:.3g})"
    return compute.scaled(1 / pace.dilation), where


def _predictions(work: Workload, compute: Compute, devices: int, bits: int,
                 modes: tuple[str, ...]) -> list:
    """Every mode of ``modes`` that can use ``devices`` devices, predicted by the core."""
    found = []
    for mode in modes:
        try:
            found.append(predict_on_devices(work, compute, mode, devices, bits))
        except PlannerError:
            continue  # this mode cannot use N devices (plain PS on an odd N)
    if not found:
        raise PlannerError(f"no mode of {', '.join(modes)} can run on {devices} devices")
    return found
