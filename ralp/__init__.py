"""ralp: resource-aware layer placement for parameter-server training of CNNs.

Public API (imported lazily, so ``import ralp`` stays cheap and has no side effects):

- :func:`profile` -- layer table, skewness, eligibility and split point of a Keras model.
- :func:`build_model`, :data:`MODEL_NAMES` -- the benchmark model zoo.
- :class:`Plan` -- which layers run on which PS task (from the profiler, JSON, or by hand).
- :func:`wrap` -- place a Keras model on a PS cluster; returns a :class:`Trainer` with ``fit``.
- :class:`ClusterSpec`, :class:`LocalCluster` -- cluster addresses; PS and worker tasks as
  local server processes.
- :func:`run_in_fresh_process` -- run a coordinator job in a process of its own.
- ``wrap(..., sync="dssp", staleness=(3, 15))``, :class:`StalenessHook`, :class:`SyncPolicy`,
  :func:`simulate_sync` -- synchronization paradigms (BSP, ASP, SSP, DSSP) for the PS trainer.
- :class:`HorovodTrainer` -- the data-parallel baseline: a Keras 3 model trained with
  Horovod's ring allreduce, inside a Horovod rank (``horovodrun``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "profile": "ralp.profiler.api",
    "Profile": "ralp.profiler.api",
    "LayerRow": "ralp.profiler.layer_table",
    "ProfileError": "ralp.profiler.layer_table",
    "build_model": "ralp.models",
    "MODEL_NAMES": "ralp.models",
    "get_model_spec": "ralp.models",
    "Plan": "ralp.placement.plan",
    "PlanError": "ralp.placement.plan",
    "wrap": "ralp.ps_strategy.trainer",
    "Trainer": "ralp.ps_strategy.trainer",
    "History": "ralp.ps_strategy.trainer",
    "PlacementWarning": "ralp.ps_strategy.trainer",
    "ClusterWarning": "ralp.ps_strategy.trainer",
    "ClusterSpec": "ralp.ps_strategy.cluster",
    "ClusterError": "ralp.ps_strategy.cluster",
    "LocalCluster": "ralp.ps_strategy.cluster",
    "run_in_fresh_process": "ralp.ps_strategy.fresh_process",
    "HorovodTrainer": "ralp.baselines.horovod_train",
    "StalenessHook": "ralp.ps_strategy.trainer",
    "SyncPolicy": "ralp.ps_strategy.staleness",
    "simulate_sync": "ralp.ps_strategy.staleness",
}

__all__ = [
    "MODEL_NAMES",
    "ClusterError",
    "ClusterSpec",
    "ClusterWarning",
    "History",
    "HorovodTrainer",
    "LayerRow",
    "LocalCluster",
    "Plan",
    "PlanError",
    "PlacementWarning",
    "Profile",
    "ProfileError",
    "StalenessHook",
    "SyncPolicy",
    "Trainer",
    "build_model",
    "get_model_spec",
    "profile",
    "run_in_fresh_process",
    "simulate_sync",
    "wrap",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ralp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from ralp.baselines.horovod_train import HorovodTrainer
    from ralp.models import MODEL_NAMES, build_model, get_model_spec
    from ralp.placement.plan import Plan, PlanError
    from ralp.profiler.api import Profile, profile
    from ralp.profiler.layer_table import LayerRow, ProfileError
    from ralp.ps_strategy.cluster import ClusterError, ClusterSpec, LocalCluster
    from ralp.ps_strategy.fresh_process import run_in_fresh_process
    from ralp.ps_strategy.staleness import SyncPolicy
    from ralp.ps_strategy.staleness import simulate as simulate_sync
    from ralp.ps_strategy.trainer import (
        ClusterWarning,
        History,
        PlacementWarning,
        StalenessHook,
        Trainer,
        wrap,
    )
