"""Every use of a private TensorFlow or Keras API in ralp, in one place, each one checked.

ralp pins tensorflow-cpu 2.21.0 and keras 3.15.1 (``requirements.txt``). Where no public API
does what ralp needs, the private attribute is used here and only here, and
``tests/test_compat.py`` holds a canary for each function that fails loudly when the pinned
version stops behaving as relied on. Nothing falls back silently: a missing attribute raises
:class:`CompatError` naming it (a silent fallback was how some of these used to fail: an
optimizer whose rebinding did not take effect deadlocks inside the PS critical section).

What is relied on, and where it is used:

==============================  ==============================================  =============
function                        private API                                     used by
==============================  ==============================================  =============
``is_functional``               ``keras.src.models.functional.Functional``      profiler
``inbound_nodes``               ``Operation._inbound_nodes``                    profiler,
                                                                                placement
``keras_history``               ``KerasTensor._keras_history``                  profiler,
                                                                                placement
``update_where_variables_live`` ``TFOptimizer._backend_update_step``,           ps_strategy
                                ``_apply_weight_decay``, ``_use_weight_decay``
``count_updates_atomically``    ``BaseOptimizer._iterations``                   ps_strategy
``apply_summed_gradients``      ``TFOptimizer._all_reduce_sum_gradients``       collective
``slot_variables``              Keras' slot naming (``{var path}_{slot}``)      audit
``remote_value_done``           ``RemoteValueImpl._status``                     ps_strategy
``_compat_coordinator``'s two   ``PerWorkerValues._values``, call-time values  ps_strategy
``concrete_functions``          ``Function._list_all_concrete_functions``       audit, tests
``SCHEDULE_WARNING``            the text of a PSS log warning                   ps_strategy
``WORKER_FAILED_LOG``           the coordinator's log line of a failed worker   ps_strategy
``colocating_creator``          PSS' ``_create_variable`` honouring             placement
                                ``colocate_with`` (and skipping round-robin)
``stop_coordinator``            ``ClusterCoordinator._cluster.stop``            ps_strategy
``read_xspace_events``          ``tensorflow.tsl.profiler.protobuf.xplane_pb2`` audit
                                and the profiler's event and stat names
``xspace_start_time``           the trace's "Task Environment" plane and its    audit
                                ``profile_start_time`` stat
``read_kernel_outside_xla``     Keras' TF backend XLA-compiling grouped         placement
                                convolutions (``backend.tensorflow.nn.conv``)
``cond_branch_graphs``          ``If`` op's ``_true_graph``/``_false_graph``    audit
                                (cond_v2)
``INLINED_BRANCH_OP``           the names of a lowered cond's inlined branches  audit
``eager_context_started``,      ``context._context_handle``,                    collective
``restart_tensorflow``          ``context._reset_context``
``remove_autograph_sources``    AutoGraph's temporary modules                   cluster,
                                (``__autograph_generated_file*``)               bench, planner
``compile_metrics``             ``trainers.compile_utils.CompileMetrics``       training
``compiled_loss``               ``trainers.compile_utils.get_loss``             training
``same_rank``                   ``losses.loss.squeeze_or_expand_to_same_rank``  training
``rows_of_predictions``         a softmax output's ``_keras_logits``            training
``dataset_graph``, ``..._from`` ``coordinator.values``' dataset serialization  training
==============================  ==============================================  =============
"""

from __future__ import annotations

import contextlib
import re
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NoReturn

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
            "those versions (./scripts/setup.sh) or update ralp/_compat.py"
        ) from None


# ------------------------------------------------------------------ Keras functional graphs


def is_functional(model) -> bool:
    """Whether ``model`` is a functional model (Keras exports no public class for it)."""
    import keras

    functional = _require(keras.src.models.functional, "Functional", "recognise functional models")
    return isinstance(model, functional)


def inbound_nodes(operation) -> list:
    """The graph nodes at which ``operation`` (a layer or a ``keras.ops`` node) was called."""
    return _require(operation, "_inbound_nodes", "walk a functional model's graph")


def keras_history(tensor) -> tuple:
    """``(operation, node_index, tensor_index)`` of the call that produced a symbolic tensor."""
    return tuple(_require(tensor, "_keras_history", "find the producer of a symbolic tensor"))


# ------------------------------------------------------------------ optimizers


def _update_where_each_variable_lives(self, grads, trainable_variables, learning_rate):
    import tensorflow as tf

    for grad, var in zip(grads, trainable_variables, strict=True):
        with tf.device(variable_device(var)):
            self.update_step(grad, var, learning_rate)


def _decay_where_each_variable_lives(self, variables):
    import tensorflow as tf

    if self.weight_decay is None:
        return
    use_weight_decay = _require(self, "_use_weight_decay", "apply weight decay per variable")
    for var in variables:
        if use_weight_decay(var):
            with tf.device(variable_device(var)):
                lr = tf.cast(self.learning_rate, var.dtype)
                wd = tf.cast(self.weight_decay, var.dtype)
                var.assign(var - var * wd * lr)


def variable_device(variable) -> str:
    """The device string of a Keras or TF variable (a Keras variable's backing one)."""
    import keras

    return (variable.value if isinstance(variable, keras.Variable) else variable).device


def update_where_variables_live(optimizer):
    """Make a Keras 3 (TF backend) optimizer update each variable on that variable's task.

    ``TFOptimizer._backend_update_step`` all-reduces the gradients in the replica context and
    applies them through ``merge_call``: under PSS the result lands on the worker (RALP's tail
    gradient would go PS -> worker -> PS), and a ``merge_call`` inside
    ``CriticalSection.execute`` deadlocks. With one replica per worker the all-reduce is the
    identity: each update runs directly, under its variable's device. Rebinds
    ``_backend_update_step`` and ``_apply_weight_decay`` on this instance."""
    for name in ("_backend_update_step", "_apply_weight_decay"):
        _require(type(optimizer), name, "update each variable where it lives")
    optimizer._backend_update_step = types.MethodType(_update_where_each_variable_lives, optimizer)
    optimizer._apply_weight_decay = types.MethodType(_decay_where_each_variable_lives, optimizer)
    return optimizer


def _gradients_as_given(self, grads_and_vars):
    return list(grads_and_vars)


def apply_summed_gradients(optimizer):
    """Make a Keras 3 (TF backend) optimizer apply the gradients it is given as they are.

    ``TFOptimizer._backend_update_step`` sums the gradients over the replicas first
    (``_all_reduce_sum_gradients``: one all-reduce of the whole list in the replica context,
    which waits for the end of the backward pass). A caller that has summed them itself, bucket
    by bucket as the backward pass produced them, must not have them summed again. Rebinds
    ``_all_reduce_sum_gradients`` on this instance to return the gradients unchanged; the
    update itself (``_distributed_tf_update_step``) is Keras' own."""
    _require(type(optimizer), "_all_reduce_sum_gradients", "apply gradients summed already")
    _require(type(optimizer), "_backend_update_step", "apply gradients summed already")
    optimizer._all_reduce_sum_gradients = types.MethodType(_gradients_as_given, optimizer)
    return optimizer


def _atomic_assign_add(self, value):
    import tensorflow as tf

    return self.value.assign_add(tf.cast(value, self.dtype))


def count_updates_atomically(optimizer):
    """Make the optimizer count its updates with one atomic add on the counter's task.

    Keras 3's ``Variable.assign_add`` is ``assign(self + value)``, a read then a write: when
    workers update at once (asynchronous schedules) two read the same count and one increment
    is lost, and the count drives learning-rate schedules and Adam's bias correction.
    ``tf.Variable.assign_add`` is one ``AssignAddVariableOp``, which holds the variable's lock.
    Rebinds ``assign_add`` of the private ``_iterations`` counter (the public ``iterations``
    may be derived under gradient accumulation)."""
    counter = _require(optimizer, "_iterations", "count optimizer updates atomically")
    counter.assign_add = types.MethodType(_atomic_assign_add, counter)
    return optimizer


def slot_variables(optimizer, variable) -> list:
    """The optimizer's slot variables of ``variable`` (Adam's m and v, SGD's momentum)."""
    return list(optimizer_slots(optimizer, [variable])[0].values())


def optimizer_slots(optimizer, variables) -> list[dict[str, object]]:
    """For each of ``variables``, the optimizer's slot variables of it by slot name
    (``{"momentum": ..., "velocity": ...}``); variables it holds no slot of get ``{}``.

    Keras names a slot ``{optimizer}/{variable path with '/' -> '_'}_{slot name}``
    (``BaseOptimizer.add_variable_from_reference``); there is no public query by variable.
    One variable's prefix can begin another's (``dense_kernel_`` and ``dense_kernel_bias_``),
    so each slot belongs to the variable of the longest prefix it starts with.
    """
    prefixes = sorted(((v.path.replace("/", "_") + "_", k) for k, v in enumerate(variables)),
                      key=lambda item: -len(item[0]))
    slots: list[dict[str, object]] = [{} for _ in variables]
    for slot in optimizer.variables:
        name = slot.path.split("/", 1)[-1]
        for prefix, k in prefixes:
            if name.startswith(prefix) and len(name) > len(prefix):
                slots[k][name[len(prefix):]] = slot
                break
    return slots


def learning_rate_variable(optimizer):
    """The variable holding the optimizer's learning rate, or None when a schedule (or a
    callable) computes it from the step count."""
    import keras

    rate = _require(optimizer, "_learning_rate", "read and set the learning rate")
    return rate if isinstance(rate, keras.Variable) else None


def initial_epoch_set_by_callbacks(model) -> int | None:
    """The epoch a callback asked ``fit`` to start from in ``on_train_begin``
    (``keras.callbacks.BackupAndRestore`` sets the model's ``_initial_epoch``), cleared."""
    epoch = getattr(model, "_initial_epoch", None)
    if hasattr(model, "_initial_epoch"):
        model._initial_epoch = None
    return epoch


# ------------------------------------------------------------------ compile's loss and metrics


def _keras_src(module: str, name: str, purpose: str):
    import importlib

    return _require(importlib.import_module(f"keras.src.{module}"), name, purpose)


def compile_metrics(metrics, weighted_metrics, y_true, y_pred):
    """The metric ``model.compile(metrics=..., weighted_metrics=...)`` builds, built for these
    labels and predictions (tensors or ``keras.KerasTensor`` specs): Keras' own metric
    objects, names (``weighted_`` prefixes) and use of sample weights."""
    cls = _keras_src("trainers.compile_utils", "CompileMetrics", "compute compiled metrics")
    compiled = cls(metrics, weighted_metrics)
    compiled.build(y_true, y_pred)
    return compiled


def compiled_loss(identifier, y_true, y_pred):
    """The ``keras.losses.Loss`` ``compile(loss=identifier)`` uses for these labels and
    predictions ("crossentropy": the binary, categorical or sparse one, by shape)."""
    return _keras_src("trainers.compile_utils", "get_loss", "resolve the compiled loss")(
        identifier, y_true, y_pred)


def rows_of_predictions(predictions, rows):
    """``predictions[:rows]``, keeping the logits Keras hangs on a softmax's output
    (``_keras_logits``): its cross-entropy then computes from the logits, as on the whole
    batch, instead of from clipped probabilities."""
    out = predictions[:rows]
    logits = getattr(predictions, "_keras_logits", None)
    if logits is not None:
        out._keras_logits = logits[:rows]
    return out


def same_rank(values, sample_weight):
    """Keras' alignment of loss values and sample weights (a trailing axis of 1 squeezed or
    added) before it multiplies them."""
    return _keras_src("losses.loss", "squeeze_or_expand_to_same_rank",
                      "weigh loss values as Keras does")(values, sample_weight)


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
                          "RemoteValueStatus; update ralp/_compat.py")
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
        raise CompatError(f"cannot read profiler traces: {e}; ralp/_compat.py needs updating "
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
                      f"ralp/_compat.py needs updating for tensorflow {PINNED['tensorflow']}+")


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
