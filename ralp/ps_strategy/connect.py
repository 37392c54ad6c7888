"""Connecting this process, as the coordinator (chief), to a PS cluster.

Before TensorFlow is asked to connect, every task's address is probed with a plain TCP
connect, bounded in time: gRPC would otherwise retry an unreachable task for a long time.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

from ralp.ps_strategy.cluster import ClusterError, ClusterSpec


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


def probe(spec: ClusterSpec, timeout: float = 10.0) -> None:
    """Raise :class:`ClusterError` naming every PS/worker task not accepting connections
    within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        missing = unreachable(spec)
        if not missing:
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"cluster unreachable after {timeout:.0f} s: {describe(missing)}. Start each task "
                "with `python -m ralp.server` (TF_CONFIG set) or use ralp.LocalCluster."
            )
        time.sleep(0.2)


@dataclass
class Connection:
    spec: ClusterSpec
    strategy: Any  # tf.distribute.ParameterServerStrategy
    coordinator: Any  # tf.distribute.coordinator.ClusterCoordinator

    @property
    def num_workers(self) -> int:
        return len(self.spec.workers)

    @property
    def num_ps(self) -> int:
        return len(self.spec.ps)


_CONNECTION: Connection | None = None


def connect(spec: ClusterSpec, *, timeout: float = 10.0) -> Connection:
    """The strategy and coordinator for ``spec``; one per process (PSS is process-global).

    Calling it again with the same spec returns the same connection; another spec is an
    error, because a process cannot leave a cluster (run the job in a fresh process).
    """
    global _CONNECTION
    if _CONNECTION is not None:
        if _CONNECTION.spec != spec:
            raise ClusterError(
                "this process is already connected to another cluster; ParameterServerStrategy "
                "cannot disconnect, so run each cluster's job in a fresh process"
            )
        return _CONNECTION
    probe(spec, timeout)
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(spec.as_dict()), task_type="chief", task_id=0, rpc_layer="grpc"
    )
    try:
        strategy = tf.distribute.ParameterServerStrategy(resolver)
    except (tf.errors.UnavailableError, tf.errors.UnknownError) as e:
        raise ClusterError(f"could not connect to the cluster: {e.message}") from None
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    _CONNECTION = Connection(spec, strategy, coordinator)
    return _CONNECTION
