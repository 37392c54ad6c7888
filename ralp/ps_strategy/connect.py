"""Connecting this process, as the coordinator (chief), to a PS cluster.

Every task is probed first (:func:`ralp.cluster.probe.probe`), so an unreachable cluster is
an error within a bounded time rather than gRPC's long retries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ralp.cluster.probe import probe
from ralp.cluster.spec import ClusterError, ClusterSpec


@dataclass
class Connection:
    spec: ClusterSpec
    strategy: Any  # tf.distribute.ParameterServerStrategy
    coordinator: Any  # tf.distribute.coordinator.ClusterCoordinator
    # Objects with remote resources that live as long as the connection (this process):
    # see keep().
    kept: list = field(default_factory=list)

    def keep(self, obj) -> Any:
        """Keep ``obj`` alive as long as this connection. Destroying per-worker datasets
        deletes their iterators on every worker, which took up to 18 s when a bench job's
        trainer was dropped on return (measured, 2 workers + 2 PS on netns); a process is
        bound to its cluster for life anyway, so they go with it."""
        self.kept.append(obj)
        return obj

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
