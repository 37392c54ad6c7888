"""The errors a ralp user can meet share one base, :class:`RalpError`.

Errors that the foundation and the simulated cluster raise live here, so that every layer can
raise them without importing a higher one.
"""

from __future__ import annotations


class RalpError(Exception):
    """Base of every error ralp raises on purpose: catch it to catch them all."""


class ClusterError(RalpError, RuntimeError):
    """The cluster is misconfigured, did not start, or became unreachable."""
