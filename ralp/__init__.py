"""ralp: resource-aware layer placement for parameter-server training of CNNs.

Public API (imported lazily, so ``import ralp`` stays cheap and has no side effects):

- :func:`profile` -- layer table, skewness, eligibility and split point of a Keras model.
- :func:`build_model`, :data:`MODEL_NAMES` -- the benchmark model zoo.
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
}

__all__ = [
    "MODEL_NAMES",
    "LayerRow",
    "Profile",
    "ProfileError",
    "build_model",
    "get_model_spec",
    "profile",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ralp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from ralp.models import MODEL_NAMES, build_model, get_model_spec
    from ralp.profiler.api import Profile, profile
    from ralp.profiler.layer_table import LayerRow, ProfileError
