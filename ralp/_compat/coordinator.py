"""The private TensorFlow APIs of the parameter-server coordinator's first steps (listed in
:mod:`ralp._compat`'s table): each checked by a canary in ``tests/test_compat.py``."""

from __future__ import annotations

from ralp._compat._checks import _require
from ralp._compat.tensorflow import remote_value_done


def every_worker_done(per_worker) -> bool:
    """Whether every worker's ``RemoteValue`` of a ``PerWorkerValues`` (a per-worker iterator:
    each made on its worker) is done, as :func:`remote_value_done` tells."""
    values = _require(per_worker, "_values", "see whether every worker made its iterator")
    return all(remote_value_done(v) for v in values)


def current_worker_index(indices: list):
    """In a function ``ClusterCoordinator`` runs on a worker: its index, as
    ``experimental_get_current_worker_index`` gives it, but passed as the tensor of
    ``indices`` (an int64 per worker, made in this process). TensorFlow's own makes a tensor
    on the worker at each call, holding Python's GIL until the worker answers."""
    import tensorflow as tf
    from tensorflow.python.distribute.coordinator import coordinator_context
    from tensorflow.python.framework import ops

    purpose = "tell a per-worker dataset which worker it runs on"
    dispatch = _require(coordinator_context, "get_current_dispatch_context", purpose)
    capture = _require(ops.get_default_graph(), "capture_call_time_value", purpose)
    return capture(lambda: indices[dispatch().worker_index], tf.TensorSpec([], tf.int64))


def trace_as_scheduled(coordinator, function, args: tuple) -> None:
    """Trace the ``tf.function`` ``function`` for ``args`` (per-worker values taken as
    worker 0's) exactly as ``coordinator.schedule(function, args=args)`` traces it (in the
    strategy's scope, while "being scheduled"), so that its first ``schedule`` finds it
    traced. Tracing registers each new function on every worker, holding Python's GIL until
    each answers: done before training begins, a worker that hangs later hangs a step, which a
    watchdog sees, instead of this process."""
    from tensorflow.python.distribute.coordinator import cluster_coordinator as cc
    from tensorflow.python.util import nest

    purpose = "trace a step before training begins"
    as_spec = _require(cc, "_maybe_as_type_spec", purpose)
    slice_of = _require(cc, "_select_worker_slice", purpose)
    extended = coordinator.strategy.extended
    _require(extended, "_being_scheduled", purpose)
    with coordinator.strategy.scope():
        extended._being_scheduled = True
        try:
            function.get_concrete_function(*nest.map_structure(as_spec, slice_of(0, args)))
        finally:
            extended._being_scheduled = False
