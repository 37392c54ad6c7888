"""Watching a PS cluster while it trains: a lost task is an error or a warning, never a hang.

ClusterCoordinator reruns a lost worker's steps on another worker, but with no worker left it
waits for one to come back (up to an hour), and a hung task blocks it forever. So the step
loops probe every task about once a second (:func:`ralp.cluster.probe.unreachable`):

- a lost PS is an error at once (its variables are gone with it);
- losing every worker is an error (the variables on the PS are intact);
- a lost worker among others is a :class:`ClusterWarning` (its steps are rerun elsewhere),
  except under a bounded synchronization paradigm, which cannot go on without it.
"""

from __future__ import annotations

import warnings

from ralp.cluster.probe import describe, unreachable
from ralp.cluster.spec import ClusterError, ClusterSpec


class ClusterWarning(UserWarning):
    """Something went wrong in the cluster that training survives (a lost worker)."""


class ClusterWatch:
    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self.lost_workers: list[tuple[str, int, str]] = []

    def check(self, synchronous: bool = False) -> None:
        """Probe every task; raise :class:`ClusterError` if training cannot go on."""
        self.judge(unreachable(self.spec), synchronous)

    def judge(self, lost: list[tuple[str, int, str]], synchronous: bool = False) -> None:
        lost_ps = [t for t in lost if t[0] == "ps"]
        lost_workers = [t for t in lost if t[0] == "worker"]
        if lost_ps:
            raise ClusterError(f"parameter server lost during training: {describe(lost_ps)}; "
                               "its variables are gone with it (restore from a checkpoint)")  # fmt: skip
        if lost_workers and len(lost_workers) == len(self.spec.workers):
            raise ClusterError(f"every worker was lost during training: {describe(lost_workers)}; "
                               "the variables on the PS are intact: save a checkpoint or restart "
                               "the workers")  # fmt: skip
        if lost_workers and synchronous:
            raise ClusterError(f"worker lost during synchronized training: {describe(lost_workers)};"
                               " a bounded paradigm cannot go on without it (restart it, or "
                               "train with sync=None / 'asp')")  # fmt: skip
        new = [t for t in lost_workers if t not in self.lost_workers]
        if new:
            self.lost_workers += new
            warnings.warn(f"worker lost during training: {describe(new)}; its steps are rerun on "
                          "the remaining workers", ClusterWarning, stacklevel=4)  # fmt: skip
