"""ralp: resource-aware layer placement for parameter-server training of CNNs.

The public API is the one table below (public name -> the module that defines it). Names load
lazily, on first use, so ``import ralp`` stays cheap and has no side effects.

- ``profile``, ``Profile``, ``LayerRow``, ``ProfileError``: layer table, skewness, eligibility
  and split point of a Keras model; ``register_layer_kind`` teaches the profiler a layer type.
- ``build_model``, ``MODEL_NAMES``, ``get_model_spec``: the benchmark model zoo.
- ``Plan``, ``PlanError``: which layers run on which PS task.
- ``wrap`` -> ``Trainer`` (``fit``, ``evaluate``, ``predict``, ``unwrap``; ``History``,
  ``Failures``, ``PlacementWarning``, ``ClusterWarning``): train a Keras model in any mode
  (ps, ralp, auto, skewness on a PS cluster; horovod, stanza, collective in every rank).
- ``ClusterSpec``, ``ClusterError``, ``LocalCluster``, ``run_in_fresh_process``: clusters.
- ``SyncPolicy``, ``simulate_sync``: synchronization paradigms (BSP, ASP, SSP, DSSP).
- ``calibrate`` -> ``Calibration``, ``recommend``: the planner (``python -m ralp.planner``):
  measure a model's compute here, predict every mode's throughput, choose.
- Errors: every one derives from ``RalpError`` (``ClusterError``, ``ProfileError``,
  ``PlanError``, ``PlannerError``, ``TrainingSetupError``, ``SyncError``,
  ``CheckpointError``, ``StanzaError``, ``CollectiveError``, ``HorovodRunError``, ``ChildError``, and
  ``InvalidArgumentError`` / ``InvalidTypeError`` for a bad argument, which are also Python's
  ``ValueError`` / ``TypeError``).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> (module, attribute); the only list of the public API
_API: dict[str, tuple[str, str]] = {
    "profile": ("ralp.profiler.api", "profile"),
    "Profile": ("ralp.profiler.api", "Profile"),
    "LayerRow": ("ralp.profiler.layer_table", "LayerRow"),
    "ProfileError": ("ralp.profiler.layer_table", "ProfileError"),
    "register_layer_kind": ("ralp.profiler.kinds", "register_layer_kind"),
    "build_model": ("ralp.models", "build_model"),
    "MODEL_NAMES": ("ralp.models", "MODEL_NAMES"),
    "get_model_spec": ("ralp.models", "get_model_spec"),
    "Plan": ("ralp.placement.plan", "Plan"),
    "PlanError": ("ralp.placement.plan", "PlanError"),
    "wrap": ("ralp.wrapping", "wrap"),
    "Failures": ("ralp.wrapping", "Failures"),
    "Trainer": ("ralp.training.trainer", "Trainer"),
    "PlacementWarning": ("ralp.wrapping", "PlacementWarning"),
    "History": ("ralp.training.history", "History"),
    "ClusterWarning": ("ralp.ps_strategy.health", "ClusterWarning"),
    "SyncPolicy": ("ralp.ps_strategy.staleness", "SyncPolicy"),
    "simulate_sync": ("ralp.ps_strategy.staleness", "simulate"),
    "ClusterSpec": ("ralp.cluster.spec", "ClusterSpec"),
    "ClusterError": ("ralp.errors", "ClusterError"),
    "RalpError": ("ralp.errors", "RalpError"),
    "InvalidArgumentError": ("ralp.errors", "InvalidArgumentError"),
    "InvalidTypeError": ("ralp.errors", "InvalidTypeError"),
    "PlannerError": ("ralp.planner.modes", "PlannerError"),
    "TrainingSetupError": ("ralp.training.compile", "TrainingSetupError"),
    "SyncError": ("ralp.ps_strategy.staleness", "SyncError"),
    "CheckpointError": ("ralp.training.checkpoints", "CheckpointError"),
    "HorovodRunError": ("ralp.horovod.launch", "HorovodRunError"),
    "ChildError": ("ralp.cluster.fresh_process", "ChildError"),
    "LocalCluster": ("ralp.cluster.local", "LocalCluster"),
    "run_in_fresh_process": ("ralp.cluster.fresh_process", "run_in_fresh_process"),
    "CollectiveError": ("ralp.collective.runtime", "CollectiveError"),
    "StanzaError": ("ralp.horovod.stanza_layout", "StanzaError"),
    "calibrate": ("ralp.planner.api", "calibrate"),
    "recommend": ("ralp.planner.api", "recommend"),
    "Calibration": ("ralp.planner.calibration", "Calibration"),
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'ralp' has no attribute {name!r}")
    module, attribute = _API[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
