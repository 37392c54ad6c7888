"""How much CPU a simulated device gets, what TensorFlow in it is told, and whether the host
kept up.

- **Default:** the host's CPUs, less a reserve for what runs outside the budgets (the
  coordinator or Horovod's driver, and the kernel's network work: veth, bridge, tbf), divided
  equally among the N devices. The reserve is measured (:data:`ralp.defaults.DEVICE_RESERVE_CPUS`
  says how).
- **By hand:** X CPUs per device (``--device-cpus X``).
- **Shared:** no limit, as before budgets existed; the tasks' CPU is still counted.
- **A watcher's words:** a device watcher (:mod:`ralp.emulation.watchers`, named by
  ``$RALP_DEVICE_WATCHER``) may add words of its own, each the default budget watched its way.

A run whose budgets plus the CPU spent outside them (and the CPU the hypervisor stole) reached
the host's CPU count could not give every device its budget: :func:`fidelity` flags it.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ralp.defaults import DEVICE_RESERVE_CPUS
from ralp.emulation import watchers
from ralp.emulation.cpu_meter import CpuSnapshot, Hierarchy, find_hierarchy
from ralp.emulation.devices import PERIOD_US, DeviceGroups, new_prefix
from ralp.errors import ClusterError

SHARED = "shared"
AUTO = "auto"
# CPU outside the budgets beyond which something else ran on the host beside the run: the
# run's own outside work (its coordinator or driver, the kernel's network work) is what the
# reserve is kept for, and stays near it.
BUSY_BESIDE_CPUS = 2 * DEVICE_RESERVE_CPUS


def host_cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0))


def device_cpus(asked: str | float | None, devices: int, cpus: int | None = None,
                reserve: float = DEVICE_RESERVE_CPUS) -> float | None:
    """CPUs per device for ``devices`` devices as ``asked`` (``auto``/None and an attached
    watcher's words: the default, ``shared``: None, else a number); raises
    :class:`ClusterError` on a budget the host cannot give."""
    cpus = host_cpus() if cpus is None else cpus
    if default_share(asked):
        share = (cpus - reserve) / devices
        if share <= 0:
            raise ClusterError(f"{cpus} CPUs less a reserve of {reserve:g} leave nothing for "
                               f"{devices} devices: use --device-cpus shared")
        return round(share, 3)
    if asked == SHARED:
        return None
    try:
        share = float(asked)
    except (TypeError, ValueError):
        raise ClusterError(f"--device-cpus {asked!r}: {choices()}") from None
    if not math.isfinite(share) or share <= 0:
        raise ClusterError(f"--device-cpus {asked!r}: CPUs per device must be a positive number")
    if share * devices > cpus:
        raise ClusterError(f"--device-cpus {share:g} for {devices} devices asks for "
                           f"{share * devices:g} CPUs, more than this host's {cpus}: ask for at "
                           f"most {cpus / devices:.3g}, or '{SHARED}'")
    return share


def default_share(asked: str | float | None) -> bool:
    """Whether ``asked`` gives the default CPUs per device: ``auto``, None, or a word the
    attached device watcher adds (:func:`ralp.emulation.watchers.budget_words`)."""
    return asked in (None, AUTO) or (isinstance(asked, str) and asked in watchers.budget_words())


def choices() -> str:
    """What ``--device-cpus`` takes, for an error message."""
    words = [f"'{w}'" for w in (AUTO, *watchers.budget_words(), SHARED)]
    text = f"give CPUs per device (e.g. 0.45), {', '.join(words[:-1])} or {words[-1]}"
    if os.environ.get(watchers.WATCHER_ENV):
        return text
    return (f"{text} (other words come from a device watcher named by "
            f"${watchers.WATCHER_ENV}; none is attached)")


def thread_counts(cpus: float | None) -> tuple[int, int] | None:
    """(intra-op, inter-op) threads for TensorFlow in a device of ``cpus`` CPUs: as many as
    the budget has whole CPUs (at least one, and two inter-op threads); None for a shared
    device (TensorFlow's own)."""
    if cpus is None:
        return None
    n = max(1, round(cpus))
    # inter-op: at least 2. With one, a PS-mode worker's first step never finished (its
    # function waits on a receive that needs a second inter-op thread; seen at 0.425 CPU).
    return n, max(2, n)


def thread_env(cpus: float | None) -> dict[str, str]:
    """The environment that sizes TensorFlow's (and BLAS') thread pools to a budget."""
    counts = thread_counts(cpus)
    if counts is None:
        return {}
    intra, inter = counts
    return {"TF_NUM_INTRAOP_THREADS": str(intra), "TF_NUM_INTEROP_THREADS": str(inter),
            "OMP_NUM_THREADS": str(intra), "OPENBLAS_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Budget:
    """What a run's devices are given: CPUs each (None: shared), on a host of ``host_cpus``.

    ``hierarchy`` is where their control groups go; None where none can be made, and then
    ``fallback`` says why (the tasks share the host, uncounted). ``watcher``: what runs beside
    the devices and adds to their records (:mod:`ralp.emulation.watchers`; None: nothing)."""

    cpus: float | None
    host_cpus: int
    hierarchy: Hierarchy | None = None
    fallback: str | None = None
    period_us: int = PERIOD_US
    watcher: watchers.DeviceWatcher | None = field(default=None, compare=False)

    def groups(self, devices: Sequence[str], unlimited: Sequence[str] = ()):
        """A context giving the run's :class:`DeviceGroups` (None without a hierarchy)."""
        if self.hierarchy is None:
            return contextlib.nullcontext(None)
        return DeviceGroups(self.hierarchy, new_prefix(), devices, self.cpus,
                            unlimited=unlimited, period_us=self.period_us,
                            watcher=self.watcher)

    def task_env(self) -> dict[str, str]:
        """What a budgeted task's environment adds (its thread pools' sizes)."""
        return thread_env(self.cpus) if self.hierarchy is not None else {}

    def describe(self) -> str:
        if self.fallback:
            return f"shared CPUs ({self.fallback})"
        if self.cpus is None:
            return f"shared CPUs ({self.host_cpus} for all tasks)"
        watched = self.watcher.describe() if self.watcher is not None else ""
        return f"{self.cpus:g} CPU per device of {self.host_cpus}" + (
            f", {watched}" if watched else "")


def fidelity(budget: Budget, before: CpuSnapshot | None, after: CpuSnapshot | None,
             unbudgeted: tuple[str, ...] = ()) -> dict:
    """The ``cpu`` field of a record: each task's CPU use against its budget and the share of
    CFS periods it was throttled; the host's CPU outside the budgets (``unbudgeted`` tasks,
    such as the coordinator, counted there and shown apart) and stolen; and ``kept_up``:
    False when the budgets plus the unbudgeted and stolen CPU reached the host's CPUs;
    ``busy_beside``: True when the CPU outside the budgets passed :data:`BUSY_BESIDE_CPUS`
    (other work on the host, which slows the devices beyond what their budgets say); and
    the fields of the budget's device watcher (:meth:`~ralp.emulation.watchers.DeviceWatcher.window`),
    whose own groups' CPU counts as unbudgeted and is its to report."""
    out: dict = {"budget_cpus": budget.cpus, "period_us": budget.period_us,
                 "host_cpus": budget.host_cpus, "threads": _listed(thread_counts(budget.cpus)),
                 "fallback": budget.fallback}
    if before is None or after is None:
        return {**out, "kept_up": None}
    wall = max(after.time - before.time, 1e-9)
    tasks, budgeted_used, budgeted, own = {}, 0.0, 0, {}
    watcher_groups = budget.watcher.groups if budget.watcher is not None else ()
    for task, end in after.tasks.items():
        if task in watcher_groups:  # the watcher's: CPU outside the budgets, its to show
            own[task] = (end.used_s - before.tasks[task].used_s) / wall
            continue
        start = before.tasks[task]
        used = (end.used_s - start.used_s) / wall
        periods = end.periods - start.periods
        row = {"used_cpus": round(used, 4)}
        if budget.cpus is not None and task not in unbudgeted:
            row["budget_use"] = round(used / budget.cpus, 4)
            row["throttled_share"] = round((end.throttled - start.throttled) / periods, 4) if periods else 0.0
        if task not in unbudgeted:
            budgeted_used += used
            budgeted += 1
        tasks[task] = row
    host = (after.host_busy_s - before.host_busy_s) / wall
    steal = (after.host_steal_s - before.host_steal_s) / wall
    outside = max(0.0, host - budgeted_used)
    out.update(wall_s=round(wall, 3), tasks=tasks, host_used_cpus=round(host, 4),
               unbudgeted_cpus=round(outside, 4), steal_cpus=round(steal, 4))
    if budget.watcher is not None:
        out.update(budget.watcher.window(before.watch, after.watch, own))
    if budget.cpus is None:
        return {**out, "kept_up": None}
    demand = budget.cpus * budgeted + outside + steal
    out["kept_up"] = bool(demand < budget.host_cpus)
    out["busy_beside"] = bool(outside > BUSY_BESIDE_CPUS)
    return out



def budget_for(asked: str | float | None, devices: int, *, counted: bool = True) -> Budget:
    """The budget of a run of ``devices`` devices, as ``asked``; falls back to shared CPUs,
    saying why, where no control group can be made here. ``counted=False`` (a real cluster):
    no groups at all."""
    cpus = device_cpus(asked, devices)
    if not counted:
        return Budget(None, host_cpus())
    hierarchy, why = find_hierarchy()
    if hierarchy is None:
        return Budget(None, host_cpus(), fallback=why)
    return Budget(cpus, host_cpus(), hierarchy, watcher=watchers.attach(asked, cpus))


def _listed(counts: tuple[int, int] | None) -> list[int] | None:
    return list(counts) if counts else None  # a record reads the same before and after JSON
