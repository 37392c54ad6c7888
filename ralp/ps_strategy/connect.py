"""Connecting this process, as the coordinator (chief), to a PS cluster.

Every task is probed first (:func:`ralp.cluster.probe.probe`), so an unreachable cluster is
an error within a bounded time rather than gRPC's long retries.

A process is bound to its cluster, but it can connect to the *same* cluster again: after a PS
restarts (empty), :func:`reconnect` makes a new strategy and coordinator, and the trainer
places its model again and restores a checkpoint. On TF 2.21 the old strategy's variables
answer "Unable to find a context_id ... Perhaps the worker was restarted", while a second
``ParameterServerStrategy`` in the same process, on the restarted cluster, places a model,
restores a checkpoint and trains.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from ralp.cluster.probe import probe
from ralp.cluster.spec import ClusterError, ClusterSpec
from ralp.defaults import GRPC_FAIL_FAST


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
# Connections replaced by reconnect(): kept, so that their remote objects are never deleted
# through a context the cluster no longer knows (that fails, and logs).
_RETIRED: list[Connection] = []
STOP_TIMEOUT_S = 30.0  # waiting for a replaced coordinator's threads to stop


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
    _CONNECTION = _connect(spec, timeout)
    return _CONNECTION


def reconnect(spec: ClusterSpec, *, timeout: float = 10.0) -> Connection:
    """A new strategy and coordinator for the same cluster, after a task restarted: what the
    old connection placed is gone with it. The old connection is kept, its coordinator
    stopped first: its failure handler would otherwise go on updating this process' cluster
    connection with the old one's settings while the new one works (measured: a checkpoint
    save then hung)."""
    global _CONNECTION
    if _CONNECTION is not None:
        if _CONNECTION.spec != spec:
            raise ClusterError("reconnect() is for the cluster this process is connected to")
        from ralp._compat import stop_coordinator

        _RETIRED.append(_CONNECTION)
        # Bounded: a failure handler waiting for a lost worker holds the lock stop() needs.
        stopper = threading.Thread(target=stop_coordinator, args=(_CONNECTION.coordinator,),
                                   daemon=True, name="ralp-retire-coordinator")
        stopper.start()
        stopper.join(STOP_TIMEOUT_S)
        _CONNECTION = None
    _CONNECTION = _connect(spec, timeout)
    return _CONNECTION


def _connect(spec: ClusterSpec, timeout: float) -> Connection:
    probe(spec, timeout)
    # TensorFlow's failure handling needs it on every task, this coordinator included; the
    # servers set it too (ralp.cluster.task_server).
    os.environ["GRPC_FAIL_FAST"] = GRPC_FAIL_FAST
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(spec.as_dict()), task_type="chief", task_id=0, rpc_layer="grpc"
    )
    try:
        strategy = tf.distribute.ParameterServerStrategy(resolver)
    except (tf.errors.UnavailableError, tf.errors.UnknownError) as e:
        raise ClusterError(f"could not connect to the cluster: {e.message}") from None
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    return Connection(spec, strategy, coordinator)
