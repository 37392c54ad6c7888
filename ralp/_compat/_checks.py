"""What every private-API shim of :mod:`ralp._compat` stands on: the pinned versions, the
log texts relied on, and :func:`_require`, which names what ralp needed a missing attribute for."""

from __future__ import annotations

from ralp.errors import RalpError

PINNED = {"tensorflow": "2.21.0", "keras": "3.15.1"}

# PSS logs this when a strategy method runs outside ClusterCoordinator.schedule; the
# synchronized drivers do that on purpose and filter the line out.
SCHEDULE_WARNING = "without using `ClusterCoordinator.schedule`"
# ClusterCoordinator logs this (an error) when it takes a worker for failed and reruns its
# step elsewhere; the only report of a worker restarted before the trainer's probes ran.
WORKER_FAILED_LOG = "Worker %s failed with %r:%s"


class CompatError(RalpError, RuntimeError):
    """The installed TensorFlow/Keras no longer has a private API ralp relies on."""


def _require(obj, name: str, purpose: str):
    """``getattr(obj, name)``, or a :class:`CompatError` saying what ralp needed it for."""
    try:
        return getattr(obj, name)
    except AttributeError:
        owner = obj.__name__ if isinstance(obj, type) else type(obj).__name__
        raise CompatError(
            f"{owner} has no attribute {name!r}, which ralp uses to {purpose}. ralp is tested "
            f"with tensorflow-cpu {PINNED['tensorflow']} and keras {PINNED['keras']}; install "
            "those versions (./scripts/setup.sh) or update ralp/_compat/"
        ) from None
