"""Code outside ralp that an environment variable names as ``module:attribute``: the
extension points the bench's processes inherit (a device watcher, a calibration command)."""

from __future__ import annotations

import importlib
import os

from ralp.errors import RalpError


def named_attribute(variable: str, what: str, error: type[RalpError] = RalpError):
    """The object ``$variable`` names as ``module:attribute``, imported; None when it is
    unset or empty. Raises ``error`` saying which ``what`` could not be found there."""
    spec = os.environ.get(variable, "").strip()
    if not spec:
        return None
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise error(f"{variable}={spec}: no {what} there ({e}); name it as "
                    "module:attribute") from None
