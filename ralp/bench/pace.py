"""The simulated cluster in the reference device's time: the host's pace, and the links
dilated by it.

A simulated device is a share of the host's CPU, so its compute follows the host (and what
else runs on it) while a shaped link keeps its rate: the ratio of compute to network, which
decides which mode wins, would follow the day. So the simulated cluster names a device by its
speed, :data:`REFERENCE_DEVICE`: the time it takes for one training step of a fixed probe
workload. Before a budget's runs (each round of ``--repeat``), the bench times that probe
inside one device's budget, alone on its devices (:func:`measure_pace`): the ``pace`` is the
reference's step time over the measured one (below 1: the host's device is slower). The
budgets stay as asked; instead the links are slowed by the same factor, the ``dilation``
(1 / pace): each link's rate divided by it, its delay multiplied (:func:`dilated_link`), as
time-dilated network emulation does (DieCast, Gupta et al. 2008). Compute and network then
keep the reference's ratio, and a run's step takes ``dilation`` times as long as on the
reference cluster: its throughput and step times are given in the reference's time
(:func:`reference_time_figures`), its host-time figures kept beside them.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

from ralp.bench.runspec import BenchError, RunSpec
from ralp.cluster.fresh_process import ChildError
from ralp.emulation.budget import budget_for
from ralp.errors import ClusterError
from ralp.units import format_bandwidth, format_latency, parse_bandwidth, parse_latency

AUTO, OFF = "auto", "off"  # --dilation: measure the pace and dilate; nothing dilated
PROBE = "probe"  # the probe's one control group
PROBE_STEPS = 5  # timed steps, as the reference was timed
PROBE_TIMEOUT_S = 900.0
MAX_DILATION = 20.0  # beyond it the bench still runs, and says the host is too slow
PACE_TOLERANCE = 0.15  # a round's two probes further apart: its links' dilation is in doubt


@dataclass(frozen=True)
class ReferenceDevice:
    """A device named by its speed: one training step (forward, backward, SGD update; the
    planner's calibration step, :func:`ralp.planner.calibration.measure`) of ``model`` at
    ``image_size`` px, ``batch_size`` images of ``num_classes`` classes, takes ``step_s``."""

    model: str
    image_size: int
    batch_size: int
    num_classes: int
    step_s: float

    def describe(self) -> str:
        return (f"{self.model} {self.image_size} px, batch {self.batch_size}: one training "
                f"step in {self.step_s:g} s")


# The device the README's tables were measured on: a definition, fixed for good. Changing it
# changes every figure the bench reports in reference time.
REFERENCE_DEVICE = ReferenceDevice("alexnet", 75, 8, 1000, 0.26)


@dataclass(frozen=True)
class Pace:
    """One budget's pace: ``probe_step_s`` is the probe's step measured inside one device's
    budget of ``device_cpus`` CPUs (None: a dilation given by hand, nothing measured), and
    ``dilation`` the factor the links are slowed by."""

    dilation: float
    device_cpus: float | None = None
    probe_step_s: float | None = None
    reference: ReferenceDevice = REFERENCE_DEVICE
    measured_at: float | None = None
    seconds: float | None = None  # how long the measurement took

    @property
    def pace(self) -> float | None:
        """The host's device against the reference's (None where not measured)."""
        return None if self.probe_step_s is None else self.reference.step_s / self.probe_step_s

    def line(self, bandwidth: str | None, latency: str | None) -> str:
        """The pace and the dilation it applies, in one line."""
        applied, delay = dilated_link(bandwidth, latency, self.dilation)
        link = f"links {bandwidth} -> {applied}" if bandwidth else "no shaped links"
        if latency:
            link += f", delay {latency} -> {delay}"
        if self.probe_step_s is None:
            return f"dilation {self.dilation:g} as given: {link}"
        return (f"pace {self.pace:.3g}: a {self.device_cpus:g}-CPU device runs the reference "
                f"step ({self.reference.describe()}) in {self.probe_step_s:.3g} s; dilation "
                f"{self.dilation:.3g}: {link}, figures in the reference device's time")

    def record_fields(self, bandwidth: str | None, latency: str | None) -> dict:
        """What every record of its runs carries of it."""
        applied, delay = dilated_link(bandwidth, latency, self.dilation)
        return {"reference_device": self.reference.describe(), "device_pace": self.pace,
                "dilation": self.dilation, "latency": latency, "applied_bandwidth": applied,
                "applied_latency": delay,
                "pace_probe": {**asdict(self), "reference": asdict(self.reference)}}


def dilation_choice(text: str) -> str | float:
    """``--dilation`` as given: 'auto', 'off', or a factor (a positive number)."""
    word = str(text).strip().lower()
    if word in (AUTO, OFF):
        return word
    try:
        factor = float(word)
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and factor > 0):
        raise BenchError(f"--dilation {text!r}: give 'auto' (measure the host's pace), 'off' "
                         "or a factor such as 2.5")
    return factor


def dilated_link(bandwidth: str | None, latency: str | None,
                 dilation: float) -> tuple[str | None, str | None]:
    """The link a dilated run shapes: ``bandwidth``'s rate divided by ``dilation`` and
    ``latency``'s delay multiplied by it (None stays None)."""
    rate = format_bandwidth(parse_bandwidth(bandwidth) / dilation) if bandwidth else None
    delay = format_latency(parse_latency(latency) * dilation) if latency else None
    return rate, delay


def measure_pace(device_cpus: str, devices: int, reference: ReferenceDevice = REFERENCE_DEVICE,
                 steps: int = PROBE_STEPS) -> Pace | None:
    """The pace of one device of a simulated cluster of ``devices`` devices budgeted
    ``device_cpus`` (as ``--device-cpus`` takes it): ``reference``'s probe step timed in a fresh
    process inside that budget, alone on the host's devices. None where the devices have no
    budget (shared CPUs): no one device's speed to measure."""
    from ralp.cluster.fresh_process import run_in_fresh_process

    budget = budget_for(device_cpus, devices)
    if budget.cpus is None or budget.hierarchy is None:
        return None
    started = time.time()
    with budget.groups([PROBE]) as groups:
        step_s = run_in_fresh_process(probe_step, reference, steps, group=groups.group(PROBE),
                                      env=budget.task_env(), timeout=PROBE_TIMEOUT_S)
    return Pace(step_s / reference.step_s, budget.cpus, step_s, reference, started,
                round(time.time() - started, 1))


def probe_step(reference: ReferenceDevice, steps: int) -> float:
    """The reference's training step, timed here as the planner's calibration times it."""
    from ralp.models import build_model
    from ralp.planner.calibration import measure

    net = build_model(reference.model, num_classes=reference.num_classes,
                      image_size=reference.image_size)
    entry = measure(net, reference.batch_size, (), (), model_name=reference.model,
                    image_size=reference.image_size, num_classes=reference.num_classes,
                    split_after=None, steps=steps)
    return entry.full_s


def held_fields(before: Pace | None, after: Pace | None) -> dict:
    """What a round's records carry of the probe taken again after the round's runs: its pace,
    how far it moved from ``before`` (the one their links were dilated by), and whether it
    held within :data:`PACE_TOLERANCE` ({} where either was not measured)."""
    if before is None or after is None or before.pace is None or after.pace is None:
        return {}
    drift = after.pace / before.pace - 1
    return {"device_pace_after": after.pace, "pace_drift": drift,
            "pace_held": abs(drift) <= PACE_TOLERANCE}


class Paces:
    """Each budget's pace in each round, measured on first asking (``--dilation auto``), or
    one factor given for every run; with ``auto``, measured again after each round's runs
    (:meth:`recheck`), since one probe says nothing of the host's pace while the runs went
    on. ``announce`` gets each pace's line."""

    def __init__(self, asked: str | float = AUTO, bandwidth: str | None = None,
                 latency: str | None = None, announce=print):
        self.asked, self.bandwidth, self.latency = asked, bandwidth, latency
        self._taken: dict[tuple, Pace | None] = {}
        self._after: dict[tuple, Pace | None] = {}
        self._announce = announce

    def for_run(self, run: RunSpec, round_index: int = 0) -> Pace | None:
        """``run``'s pace in round ``round_index`` (None: nothing dilated)."""
        return self.of(run.device_cpus, run.devices, round_index)

    def of(self, device_cpus: str, devices: int, round_index: int = 0) -> Pace | None:
        """The pace of ``devices`` devices budgeted ``device_cpus`` in round ``round_index``
        (None: nothing dilated), measured on first asking and kept for the round's runs."""
        if self.asked == OFF:
            return None
        if not isinstance(self.asked, str):
            return Pace(float(self.asked))
        key = (device_cpus, devices, round_index)
        if key not in self._taken:
            pace = measure_pace(device_cpus, devices)
            self._taken[key] = pace
            if pace is not None:
                self._announce(f"N={devices}: {pace.line(self.bandwidth, self.latency)}")
                if pace.dilation > MAX_DILATION:
                    self._announce(too_slow(pace))
        return self._taken[key]

    def recheck(self, round_index: int) -> None:
        """Measure again each budget whose pace round ``round_index`` measured, after its runs,
        and say whether it held."""
        for key, before in list(self._taken.items()):
            if key[2] != round_index or before is None or before.probe_step_s is None:
                continue
            try:
                after = self._after[key] = measure_pace(key[0], key[1])
            except (ChildError, ClusterError) as e:  # a check: its failure loses no record
                self._announce(f"N={key[1]}: could not probe the pace again after the "
                               f"round's runs ({e}); its records say nothing of it")
                continue
            fields = held_fields(before, after)
            if fields:
                verdict = "held" if fields["pace_held"] else (
                    f"moved by more than {PACE_TOLERANCE:.0%}: the round's records are marked")
                self._announce(f"N={key[1]}: pace {after.pace:.3g} after the round's runs "
                               f"({before.pace:.3g} before): {verdict}")

    def held_for_run(self, run: RunSpec, round_index: int = 0) -> dict:
        """:func:`held_fields` of ``run``'s budget in round ``round_index`` (after
        :meth:`recheck`; {} before it, or where nothing was measured)."""
        key = (run.device_cpus, run.devices, round_index)
        return held_fields(self._taken.get(key), self._after.get(key))


def too_slow(pace: Pace) -> str:
    """What the bench says when the host's devices are too slow to dilate faithfully."""
    return (f"the host's {pace.device_cpus:g}-CPU device is {pace.dilation:.3g} times slower "
            f"than the reference (more than {MAX_DILATION:g}): what runs outside the budgets "
            "(the coordinator, the kernel's network work) is not dilated and weighs more the "
            "slower the devices; give the devices more CPU (--device-cpus) or run on a less "
            "busy host")


def reference_time_figures(record: dict, dilation: float | None) -> dict:
    """A record's throughput and step times in the reference device's time (a dilated step
    takes ``dilation`` times as long), the host's throughput and step kept beside them."""
    if not dilation:
        return {}
    out = {"host_images_per_sec": record.get("images_per_sec"),
           "host_step_time_s": record.get("step_time_s")}
    for key, scale in (("images_per_sec", dilation), ("images_per_sec_iqr", dilation),
                       ("step_time_s", 1 / dilation), ("step_time_iqr_s", 1 / dilation),
                       ("compute_step_time_s", 1 / dilation), ("wire_step_time_s", 1 / dilation),
                       ("cpu_step_time_s", 1 / dilation), ("bound_step_time_s", 1 / dilation)):
        value = record.get(key)
        if value is not None:  # a figure, or an interquartile range [q1, q3]
            out[key] = [v * scale for v in value] if isinstance(value, list) else value * scale
    return out
