"""Is a cluster reachable? Plain TCP probes of every task, bounded in time.

Before TensorFlow is asked to connect, every task's address is probed with a plain TCP
connect: gRPC would otherwise retry an unreachable task for a long time. The trainer probes
again while it trains, to tell a lost task from a slow one.
"""

from __future__ import annotations

import socket
import time

from ralp.cluster.spec import ClusterError, ClusterSpec


def unreachable(spec: ClusterSpec, timeout: float = 1.0) -> list[tuple[str, int, str]]:
    """The PS/worker tasks not accepting TCP connections right now."""
    missing = []
    for job, index, address in spec.tasks():
        host, port = address.rsplit(":", 1)
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                pass
        except OSError:
            missing.append((job, index, address))
    return missing


def describe(tasks: list[tuple[str, int, str]]) -> str:
    return ", ".join(f"{job}:{index} at {address}" for job, index, address in tasks)


def wait_until_reachable(spec: ClusterSpec, timeout: float) -> list[tuple[str, int, str]]:
    """Wait up to ``timeout`` seconds for every PS/worker task to accept connections; the
    tasks that still do not (empty when all do)."""
    deadline = time.monotonic() + timeout
    while True:
        missing = unreachable(spec)
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.2)


def probe(spec: ClusterSpec, timeout: float = 10.0) -> None:
    """Raise :class:`ClusterError` naming every PS/worker task not accepting connections
    within ``timeout`` seconds."""
    missing = wait_until_reachable(spec, timeout)
    if missing:
        raise ClusterError(
            f"cluster unreachable after {timeout:.0f} s: {describe(missing)}. Start each task "
            "with `python -m ralp.server` (TF_CONFIG set) or use ralp.LocalCluster."
        )
