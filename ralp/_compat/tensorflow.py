"""Private TensorFlow APIs: datasets on PS workers, the coordinator, profiler traces, variable
creation, lowered conds, collectives' restart, process exit (see the table in :mod:`ralp._compat`)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NoReturn

from ralp._compat._checks import PINNED, CompatError, _require

# ------------------------------------------------------------------ datasets on PS workers


def dataset_graph(dataset):
    """``dataset`` serialized as a graph, as ``ClusterCoordinator.create_per_worker_dataset``
    serializes one to make it again on each worker."""
    from tensorflow.python.distribute.coordinator import values

    return _require(values, "serialize_dataset_to_graph", "send a dataset to workers")(dataset)


def dataset_from_graph(graph, element_spec):
    """The dataset of :func:`dataset_graph`'s graph, made where this runs (a worker)."""
    from tensorflow.python.distribute.coordinator import values

    return _require(values, "deserialize_dataset_from_graph", "make a dataset on a worker")(
        graph, element_spec)


# ------------------------------------------------------------------ distribution


def remote_value_done(remote) -> bool:
    """Whether a scheduled step's ``RemoteValue`` has finished (or failed), without waiting."""
    from tensorflow.python.distribute.coordinator.remote_value import RemoteValueStatus

    status = _require(remote, "_status", "see whether a scheduled step has finished")
    if not isinstance(status, RemoteValueStatus):
        raise CompatError(f"RemoteValue._status is a {type(status).__name__}, not a "
                          "RemoteValueStatus; update ralp/_compat/")
    return status in (RemoteValueStatus.READY, RemoteValueStatus.ABORTED)


def stop_coordinator(coordinator) -> None:
    """Stop a ``ClusterCoordinator``'s worker threads, failure handler and queue now (TF does
    it only in ``__del__``; a coordinator replaced after a PS restart is kept, and its failure
    handler would go on updating the process-wide context). Returns when the handler holds
    no update (``stop`` takes its lock)."""
    cluster = _require(coordinator, "_cluster", "stop a replaced coordinator")
    _require(cluster, "stop", "stop a replaced coordinator")()


def concrete_functions(function) -> list:
    """Every concrete function a ``tf.function`` has traced so far, oldest first."""
    return list(_require(function, "_list_all_concrete_functions", "find a step's traces")())


@dataclass(frozen=True)
class TraceEvent:
    """One event of a profiler trace (XSpace), on the traced task's clock."""

    name: str  # the kernel's node name and type ("scope/op:Type"), or a runtime event
    op_type: str  # the kernel's op type ("" for runtime events)
    start: float  # seconds
    seconds: float
    stats: dict  # e.g. name, kernel_type, step_id of an asynchronous kernel


def read_xspace_events(path: str) -> Iterator[TraceEvent]:
    """Every event of the first (host CPU) plane of a ``tf.profiler`` trace file. TensorFlow
    ships the XSpace protobuf only in its internal ``tsl`` package."""
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2
    except ImportError as e:
        raise CompatError(f"cannot read profiler traces: {e}; ralp/_compat/ needs updating "
                          f"for tensorflow {PINNED['tensorflow']}+") from None
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    if not space.planes:
        return
    plane = space.planes[0]
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}

    def value(stat):
        if stat.HasField("str_value"):
            return stat.str_value
        if stat.HasField("ref_value"):
            return stat_names.get(stat.ref_value, "")
        return stat.int64_value or stat.uint64_value or stat.double_value

    for line in plane.lines:
        for event in line.events:
            meta = plane.event_metadata[event.metadata_id]
            yield TraceEvent(meta.name, meta.display_name,
                             line.timestamp_ns * 1e-9 + event.offset_ps * 1e-12,
                             event.duration_ps * 1e-12,
                             {stat_names.get(s.metadata_id, ""): str(value(s)) for s in event.stats})


def xspace_start_time(path: str) -> float:
    """When a ``tf.profiler`` trace began, in seconds since the epoch: the events' times
    (:func:`read_xspace_events`) count from it, so that traces of several processes on one
    host can be laid on one clock. Read from the trace's "Task Environment" plane."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for stat in plane.stats:
            if names.get(stat.metadata_id) == "profile_start_time":
                return (stat.int64_value or stat.uint64_value) * 1e-9
    raise CompatError(f"the trace {path} says not when it began (no profile_start_time); "
                      f"ralp/_compat/ needs updating for tensorflow {PINNED['tensorflow']}+")


def colocating_creator(anchor) -> Callable:
    """A variable creator that puts every variable on ``anchor``'s task: PSS overrides
    ``tf.device`` with its round-robin, but its ``_create_variable`` honours
    ``colocate_with`` (and skips the round-robin)."""

    def creator(next_creator, **kwargs):
        kwargs["colocate_with"] = anchor
        kwargs["use_resource"] = True
        return next_creator(**kwargs)

    return creator


def read_kernel_outside_xla(layer) -> None:
    """Let a grouped convolution run with its kernel held by another task (a PS).

    Keras' TF backend runs a convolution with ``groups > 1`` inside a ``tf.function(
    jit_compile=True)`` (grouped convolutions are broken on CPU without XLA), and an XLA
    function cannot read a variable on another task ("Trying to access resource ... located
    in device /job:ps"). The kernel is read first, outside it, and handed in as a tensor; the
    gradient still flows to the variable. Rebinds ``convolution_op`` on this layer only."""
    import keras
    import tensorflow as tf

    if not isinstance(layer, keras.layers.Conv1D | keras.layers.Conv2D | keras.layers.Conv3D):
        return
    if getattr(layer, "groups", 1) == 1:
        return
    convolution = _require(layer, "convolution_op", "read a grouped conv's kernel outside XLA")

    def convolution_op(inputs, kernel):
        return convolution(inputs, tf.convert_to_tensor(kernel))  # the read, outside XLA

    layer.convolution_op = convolution_op


# ------------------------------------------------------------------ lowered conds (audit)

# Lowering a traced cond to Switch/Merge inlines each branch's function; its ops are named
# "<If op>/then/_<n>/<op in the branch graph>" ("else" for the other branch), nested as often
# as conds nest. A runtime naming convention, not an API: the audit's tests fail on a change.
INLINED_BRANCH_OP = re.compile(r"(?P<cond>.+?)/(?P<branch>then|else)/_\d+/(?P<inner>.+)")


def cond_branch_graphs(op) -> tuple:
    """The then and else ``FuncGraph`` of a traced ``If`` op (cond_v2 keeps them on the op;
    rebuilding them from the function library would trace them anew)."""
    purpose = "size the tensors a cond's branch computes"
    return _require(op, "_true_graph", purpose), _require(op, "_false_graph", purpose)


# ------------------------------------------------------------------ collectives


def eager_context_started() -> bool:
    """Whether TensorFlow's eager context has started in this process."""
    from tensorflow.python.eager import context

    return _require(context.context(), "_context_handle", "see whether TensorFlow started") \
        is not None


@contextlib.contextmanager
def restart_tensorflow() -> Iterator[None]:
    """Start TensorFlow's eager context again (with Keras' global state cleared) for what the
    block makes first, such as ``MultiWorkerMirroredStrategy``, which configures collectives
    at the context's start. Everything TensorFlow and Keras made before is unusable after
    it. Keras' global dtype policy is kept; TensorFlow's global random generator is made
    anew after the block."""
    import keras
    import tensorflow as tf
    from tensorflow.python.eager import context

    policy = keras.mixed_precision.global_policy()
    keras.backend.clear_session()
    _require(context, "_reset_context", "start TensorFlow again for its collectives")()
    yield
    keras.mixed_precision.set_global_policy(policy)
    tf.random.set_global_generator(tf.random.Generator.from_non_deterministic_state())


def coordination_key_values() -> tuple[Callable[[str, str], None], Callable[[str], str]]:
    """(set, get) of the coordination service's key-value store in a multi-worker job
    (``MultiWorkerMirroredStrategy`` starts the service): ``get`` blocks until the key is set.
    TensorFlow exposes it only on its private eager context."""
    from tensorflow.python.eager import context

    ctx = context.context()
    purpose = "let a collective job's workers leave together"
    return (_require(ctx, "set_config_key_value", purpose),
            _require(ctx, "get_config_key_value", purpose))


# ------------------------------------------------------------------ process exit

# AutoGraph writes each function it converts to a temporary file named thus and imports it
# as a module of that name; the file is removed by an atexit handler only.
AUTOGRAPH_MODULE_PREFIX = "__autograph_generated_file"


def remove_autograph_sources() -> int:
    """Delete the temporary source files of the functions AutoGraph converted in this process
    (the modules stay loaded); returns how many. For a process that leaves by ``os._exit``,
    where AutoGraph's atexit handlers never run (hundreds of files were left per run)."""
    import os
    import sys

    removed = 0
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name.startswith(AUTOGRAPH_MODULE_PREFIX) and path and os.path.exists(path):
            with contextlib.suppress(OSError):  # not ours to remove: leave it
                os.remove(path)
                removed += 1
    return removed


def exit_without_teardown(code: int = 0) -> NoReturn:
    """Leave this process now, skipping the interpreter's teardown (TensorFlow's collective
    servers cannot stop cleanly; Horovod's took seconds): AutoGraph's sources removed and the
    standard streams flushed first, as the skipped atexit handlers would have."""
    import os
    import sys

    remove_autograph_sources()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # leaving anyway
            stream.flush()
    os._exit(code)
