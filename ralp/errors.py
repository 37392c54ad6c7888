"""The errors a ralp user can meet share one base, :class:`RalpError`.

Errors that the foundation and the simulated cluster raise live here, so that every layer can
raise them without importing a higher one.
"""

from __future__ import annotations


class RalpError(Exception):
    """Base of every error ralp raises on purpose: catch it to catch them all."""


class ClusterError(RalpError, RuntimeError):
    """The cluster is misconfigured, did not start, or became unreachable."""


class InvalidArgumentError(RalpError, ValueError):
    """An argument has a value ralp cannot use (also a ``ValueError``, as Python's own)."""


class InvalidTypeError(RalpError, TypeError):
    """An argument has a type ralp cannot use (also a ``TypeError``, as Python's own)."""


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the user's line: the first caller outside ralp."""
    import os
    import sys
    import warnings

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
