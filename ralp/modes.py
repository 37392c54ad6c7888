"""Every mode ralp knows, in one table: what ``ralp.wrap``, the planner, the profiler's byte
model and the bench read about a mode comes from here.

==========  =============  =====================================================
mode        workers + PS   what it is (RALP's configurations: Park et al. 2019)
==========  =============  =====================================================
ps          N/2 + N/2      plain ParameterServerStrategy, common practice
ralp-h      N/2 + 1        RALP with half the devices as workers: saves resources
ralp-n      N-1 + 1        RALP with every device but one as a worker: most speed
horovod     N + 0          Horovod ring allreduce (Gloo): every device a worker
collective  N + 0          TensorFlow's own collectives (MultiWorkerMirroredStrategy)
stanza      N-F + F        layer separation (Stanza) on Horovod: N-F CONV ranks
                           allreduce the head, F FC ranks (default 1) hold the tail
==========  =============  =====================================================

In a ``stanza`` job, ``workers`` counts the CONV ranks and ``ps`` the FC ranks.

Two kinds of entries:

- :data:`MODES`, the runtime's modes as the planner and the bench name them (``--modes``):
  each a :class:`Mode` with its family, its resources on N devices, its byte-model key, what
  it needs, how the bench runs it and how the figure draws it.
- :data:`WRAP_MODES`, the ``mode=`` values of ``ralp.wrap``: each a :class:`WrapMode` with the
  runtime it builds and the settings it takes. ``auto`` (the planner's choice) and
  ``skewness`` (the RALP paper's rule) resolve to ``ps`` or ``ralp`` before anything runs.

A runtime, a step function or a bench job is named by its path (``"package.module:name"``)
and imported only when :func:`load` is called, so that importing this table imports no
TensorFlow and no other part of ralp: every layer may read it.

Adding a mode: an entry here, its runtime in its own package, its tests
(``docs/architecture.md``, "Adding a mode").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

# The modes' names. Outside this table a mode's name is written only in its own package
# (tests/test_modes.py): ps and ralp in ralp/ps_strategy, horovod and stanza in ralp/horovod,
# collective in ralp/collective, auto in ralp/planner, skewness in ralp/placement.
PS, RALP, RALP_H, RALP_N = "ps", "ralp", "ralp-h", "ralp-n"
HOROVOD, STANZA, COLLECTIVE = "horovod", "stanza", "collective"
AUTO, SKEWNESS = "auto", "skewness"

# Families: the planner's step model and the bench's way of running a mode follow its family.
PS_FAMILY = "ps"  # workers and PS tasks of ParameterServerStrategy, one coordinator
ALLREDUCE = "allreduce"  # every device a worker, gradients allreduced in a ring
LAYER_SPLIT = "stanza"  # CONV ranks allreduce the head, FC ranks hold the tail

# How the bench starts a run: a PS cluster and a coordinator, horovodrun's ranks, or
# TensorFlow's own workers (TF_CONFIG), each started by the bench.
PS_CLUSTER, HOROVOD_RANKS, TF_WORKERS = "ps-cluster", "horovod-ranks", "tf-workers"

# The planner's step function of each family (ralp.planner.topology).
STEP_FUNCTIONS = {PS_FAMILY: "ralp.planner.topology:ps_family_step_s",
                  ALLREDUCE: "ralp.planner.topology:ring_step_s",
                  LAYER_SPLIT: "ralp.planner.topology:stanza_step_s"}


class ResourceError(ValueError):
    """A mode cannot run on the devices asked for; the message says why (the planner raises it
    again as its own error)."""


def _two_or_more(mode: str, what: str) -> Callable[[int, int], None]:
    def check(devices: int, _fc: int) -> None:
        if devices < 2:
            raise ResourceError(f"mode {mode!r} needs at least 2 devices {what}, got {devices}")
    return check


def _ps_resources(devices: int, _fc: int) -> tuple[int, int]:
    if devices < 2 or devices % 2:
        raise ResourceError(f"mode {PS!r} splits the devices evenly into workers and PS tasks: "
                            f"N must be even and at least 2, got {devices}")
    return devices // 2, devices // 2


def _ralp_h_resources(devices: int, fc: int) -> tuple[int, int]:
    _two_or_more(RALP_H, "(a worker and a PS)")(devices, fc)
    if devices % 2:
        raise ResourceError(f"mode {RALP_H!r} gives half the devices to workers and one to the "
                            f"PS: N must be even, got {devices}")
    return devices // 2, 1


def _ralp_n_resources(devices: int, fc: int) -> tuple[int, int]:
    _two_or_more(RALP_N, "(a worker and a PS)")(devices, fc)
    return devices - 1, 1


def _ring_resources(mode: str) -> Callable[[int, int], tuple[int, int]]:
    def resources(devices: int, fc: int) -> tuple[int, int]:
        _two_or_more(mode, "to allreduce")(devices, fc)
        return devices, 0
    return resources


def _stanza_resources(devices: int, fc: int) -> tuple[int, int]:
    if devices < 2:
        raise ResourceError(f"mode {STANZA!r} needs at least 2 devices (a CONV rank and an FC "
                            f"rank), got {devices}")
    return devices - fc, fc


@dataclass(frozen=True)
class Mode:
    """One of the runtime's modes as the planner and the bench know it.

    Attributes:
        name: as ``--modes`` spells it.
        family: :data:`PS_FAMILY`, :data:`ALLREDUCE` or :data:`LAYER_SPLIT`.
        wrap_as: the ``ralp.wrap`` mode that trains it (:data:`WRAP_MODES`).
        resources: ``(devices, fc_workers) -> (workers, ps)`` on N devices (stanza: CONV and
            FC ranks); raises :class:`ResourceError` where it cannot use them.
        bytes_key: its mode in the profiler's byte model (``mode_traffic``).
        offloads: whether it moves the layers after the split off the workers (RALP's tail on
            the PS, Stanza's FC ranks).
        needs: (rank, what) it needs beyond TensorFlow: a tie in the planner goes to the mode
            of the lowest rank.
        launch: how the bench starts it (:data:`PS_CLUSTER`, :data:`HOROVOD_RANKS`,
            :data:`TF_WORKERS`).
        bench_job: the function that measures one run (``module:name``).
        color: its bars' colour in the bench's figure.
        plot_order: its place among the figure's bars, left first.
        predicted: whether the planner has a step-time model for it.
    """

    name: str
    family: str
    wrap_as: str
    resources: Callable[[int, int], tuple[int, int]]
    bytes_key: str
    offloads: bool
    needs: tuple[int, str]
    launch: str
    bench_job: str
    color: str
    plot_order: int
    predicted: bool = True

    @property
    def step_function(self) -> str:
        """The planner's step function of its family (``module:name``)."""
        return STEP_FUNCTIONS[self.family]

    @property
    def on_horovod(self) -> bool:
        """Whether it runs on Horovod (a compiled Horovod, ranks started by horovodrun)."""
        return self.launch == HOROVOD_RANKS

    @property
    def has_ps(self) -> bool:
        """Whether it runs on a parameter-server cluster (sync paradigms, pull schedules)."""
        return self.family == PS_FAMILY


_PS_JOB = "ralp.bench.ps_job:bench_job"
_RANK_JOB = "ralp.bench.horovod_job:rank_command"
_PLAN = (1, "a placement plan")
_HOROVOD = (3, "a compiled Horovod")

_TABLE = (
    Mode(PS, PS_FAMILY, PS, _ps_resources, PS, False, (0, "nothing beyond TensorFlow"),
         PS_CLUSTER, _PS_JOB, "#8c8c8c", 0),
    Mode(RALP_H, PS_FAMILY, RALP, _ralp_h_resources, RALP, True, _PLAN, PS_CLUSTER, _PS_JOB,
         "#1f77b4", 1),
    Mode(RALP_N, PS_FAMILY, RALP, _ralp_n_resources, RALP, True, _PLAN, PS_CLUSTER, _PS_JOB,
         "#ff7f0e", 2),
    Mode(HOROVOD, ALLREDUCE, HOROVOD, _ring_resources(HOROVOD), HOROVOD, False, _HOROVOD,
         HOROVOD_RANKS, _RANK_JOB, "#2ca02c", 3),
    Mode(STANZA, LAYER_SPLIT, STANZA, _stanza_resources, STANZA, True, _HOROVOD,
         HOROVOD_RANKS, _RANK_JOB, "#9467bd", 5),
    Mode(COLLECTIVE, ALLREDUCE, COLLECTIVE, _ring_resources(COLLECTIVE), COLLECTIVE, False,
         (2, "TensorFlow's collectives on every worker"), TF_WORKERS,
         "ralp.bench.collective_job:job_command", "#17becf", 4),
)
MODES: dict[str, Mode] = {m.name: m for m in _TABLE}
NAMES = tuple(MODES)  # the planner's and the bench's order
PREDICTED = tuple(m.name for m in _TABLE if m.predicted)
HOROVOD_MODES = tuple(m.name for m in _TABLE if m.on_horovod)
COLLECTIVE_MODES = tuple(m.name for m in _TABLE if m.launch == TF_WORKERS)
NO_PS_MODES = tuple(m.name for m in _TABLE if not m.has_ps)
PLOT_ORDER = tuple(sorted(NAMES, key=lambda name: MODES[name].plot_order))
# the byte model's modes, as its error lists them
BYTE_MODES = (PS, HOROVOD, COLLECTIVE, RALP, STANZA)


# The ralp.wrap settings every parameter-server mode takes, beside the model's own.
_PS_SETTINGS = frozenset({"sync", "pulls", "device_type", "cluster"})


@dataclass(frozen=True)
class WrapMode:
    """One ``mode=`` of ``ralp.wrap``.

    Attributes:
        name: as ``mode=`` spells it.
        family: :data:`PS_FAMILY` (a PS cluster, the coordinator trains), else every rank of a
            job its launcher started runs the same script.
        runtime: what builds its trainer (``module:name``): for the PS modes the runtime
            class ``ralp.wrap`` makes after it connects; for the others a function
            ``(model, optimizer, loss, metrics, *, batch_size, plan, step_timeout,
            fc_workers) -> Trainer``.
        takes: the ``ralp.wrap`` settings it accepts (others are refused).
    """

    name: str
    family: str
    runtime: str
    takes: frozenset[str]


_PS_RUNTIME = "ralp.ps_strategy.runtime:PSRuntime"
_WRAP_TABLE = (
    WrapMode(AUTO, PS_FAMILY, _PS_RUNTIME, _PS_SETTINGS | {"bandwidth", "calibration"}),
    WrapMode(SKEWNESS, PS_FAMILY, _PS_RUNTIME, _PS_SETTINGS | {"plan"}),
    WrapMode(RALP, PS_FAMILY, _PS_RUNTIME, _PS_SETTINGS | {"plan"}),
    WrapMode(PS, PS_FAMILY, _PS_RUNTIME, _PS_SETTINGS | {"plan"}),
    WrapMode(HOROVOD, ALLREDUCE, "ralp.horovod.wrap:horovod_trainer", frozenset()),
    WrapMode(STANZA, LAYER_SPLIT, "ralp.horovod.wrap:stanza_trainer",
             frozenset({"fc_workers", "plan"})),
    WrapMode(COLLECTIVE, ALLREDUCE, "ralp.collective.wrap:collective_trainer", frozenset()),
)
WRAP_MODES: dict[str, WrapMode] = {m.name: m for m in _WRAP_TABLE}


def load(path: str):
    """The object a ``"package.module:name"`` path names, imported now."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)
