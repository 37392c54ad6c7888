"""Canaries for every private TensorFlow/Keras API in ``ralp._compat``: each fails loudly when
the pinned version stops behaving as ralp relies on."""

import inspect
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from ralp import _compat
from ralp._compat import CompatError


def test_the_pinned_versions_are_installed():
    assert tf.__version__ == _compat.PINNED["tensorflow"]
    assert keras.__version__ == _compat.PINNED["keras"]


def _functional():
    inputs = keras.Input((4,), name="x")
    hidden = keras.layers.Dense(3, name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(2, name="out")(hidden), name="f")


def test_functional_models_are_recognised():
    class Subclassed(keras.Model):
        def call(self, x):
            return x

    assert _compat.is_functional(_functional())
    assert not _compat.is_functional(Subclassed())


def test_the_graph_of_a_functional_model_can_be_walked():
    model = _functional()
    operation, node_index, tensor_index = _compat.keras_history(model.outputs[0])
    assert (operation.name, node_index, tensor_index) == ("out", 0, 0)
    (node,) = _compat.inbound_nodes(model.get_layer("out"))
    (fed,) = node.input_tensors
    assert _compat.keras_history(fed)[0] is model.get_layer("hidden")


def _conv_trace(layer):
    """(the XLA-compiled calls, the variable reads) of one traced call of ``layer``."""
    fn = tf.function(lambda x: layer(x)).get_concrete_function(tf.TensorSpec((1, 8, 8, 4)))
    xla, reads = [], []
    for op in fn.graph.get_operations():
        if op.type == "ReadVariableOp":
            reads.append(op.name)
        elif op.type in ("PartitionedCall", "StatefulPartitionedCall"):
            try:
                compiled = op.get_attr("_XlaMustCompile")
            except ValueError:
                compiled = False
            xla += [op.name] if compiled else []
    return xla, reads


def test_a_grouped_convolution_reads_its_kernel_outside_its_xla_function():
    layer = keras.layers.Conv2D(4, 3, groups=2)
    layer.build((None, 8, 8, 4))
    xla, reads = _conv_trace(layer)
    # Keras still XLA-compiles grouped convolutions on CPU and reads the kernel inside
    # (only the bias is read outside): without the workaround a PS-held kernel fails.
    assert xla and len(reads) == 1, (xla, reads)
    _compat.read_kernel_outside_xla(layer)
    xla, reads = _conv_trace(layer)
    assert xla and len(reads) == 2, (xla, reads)
    x = tf.random.uniform((1, 8, 8, 4))
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(layer(x))
    assert all(g is not None for g in tape.gradient(y, layer.trainable_variables))
    plain = keras.layers.Conv2D(4, 3)
    _compat.read_kernel_outside_xla(plain)
    assert "convolution_op" not in vars(plain)  # ungrouped: left alone


def test_a_missing_private_api_is_a_loud_error_naming_it():
    with pytest.raises(CompatError, match="'_inbound_nodes'.*keras 3.15.1"):
        _compat.inbound_nodes(object())
    with pytest.raises(CompatError, match="_backend_update_step"):
        _compat.update_where_variables_live(object())


def _dense_and_grads():
    layer = keras.layers.Dense(2, kernel_initializer="ones")
    layer.build((None, 3))
    grads = [tf.fill(v.shape, 0.5) for v in layer.trainable_variables]
    return layer, grads


def test_the_rebound_update_runs_and_computes_the_same_step(monkeypatch):
    calls = []
    original = _compat.variable_device
    monkeypatch.setattr(_compat.keras, "variable_device", lambda v: calls.append(v) or original(v))
    reference_layer, grads = _dense_and_grads()
    keras.optimizers.SGD(0.1, momentum=0.9, weight_decay=0.01).apply_gradients(
        zip(grads, reference_layer.trainable_variables, strict=True))
    layer, _ = _dense_and_grads()
    optimizer = _compat.update_where_variables_live(
        keras.optimizers.SGD(0.1, momentum=0.9, weight_decay=0.01))
    optimizer.apply_gradients(zip(grads, layer.trainable_variables, strict=True))
    # our update and our weight decay each ran once per variable: the rebinding took effect
    assert len(calls) == 2 * len(layer.trainable_variables)
    for ours, theirs in zip(layer.get_weights(), reference_layer.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_summed_gradients_are_applied_as_they_are(monkeypatch):
    # Keras' update sums the gradients through _all_reduce_sum_gradients: our rebinding of it
    # is what runs (once, on every gradient), and the step is Keras' own
    calls = []
    monkeypatch.setattr(_compat.keras, "_gradients_as_given",
                        lambda self, pairs: calls.append(list(pairs)) or calls[-1])
    reference_layer, grads = _dense_and_grads()
    keras.optimizers.SGD(0.1, momentum=0.9).apply_gradients(
        zip(grads, reference_layer.trainable_variables, strict=True))
    layer, _ = _dense_and_grads()
    optimizer = _compat.apply_summed_gradients(keras.optimizers.SGD(0.1, momentum=0.9))
    optimizer.apply_gradients(zip(grads, layer.trainable_variables, strict=True))
    assert len(calls) == 1 and len(calls[0]) == len(layer.trainable_variables)
    for ours, theirs in zip(layer.get_weights(), reference_layer.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    with pytest.raises(CompatError, match="_all_reduce_sum_gradients"):
        _compat.apply_summed_gradients(object())


def test_the_update_counter_is_one_atomic_add():
    layer, grads = _dense_and_grads()
    optimizer = _compat.count_updates_atomically(keras.optimizers.Adam())
    for _ in range(3):
        optimizer.apply_gradients(zip(grads, layer.trainable_variables, strict=True))
    assert int(optimizer.iterations) == 3

    @tf.function
    def count():
        optimizer._iterations.assign_add(1)

    ops = {op.type for op in count.get_concrete_function().graph.get_operations()}
    assert "AssignAddVariableOp" in ops and "AssignVariableOp" not in ops


@pytest.mark.parametrize(("optimizer", "slots"), [(keras.optimizers.Adam, 2),
                                                  (lambda: keras.optimizers.SGD(momentum=0.9), 1)])
def test_slot_variables_are_found_by_their_variable(optimizer, slots):
    layer, _ = _dense_and_grads()
    opt = optimizer()
    opt.build(layer.trainable_variables)
    for variable in layer.trainable_variables:
        found = _compat.slot_variables(opt, variable)
        assert len(found) == slots and all(s.shape == variable.shape for s in found)


def test_a_slot_belongs_to_the_variable_of_the_longest_prefix():
    # "dense_kernel_" begins "dense_kernel_bias_": each slot must still find its own variable
    inputs = keras.Input((3,))
    first = keras.layers.Dense(2, name="dense")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2, name="dense_kernel")(first))
    opt = keras.optimizers.Adam()
    opt.build(model.trainable_variables)
    found = _compat.optimizer_slots(opt, model.trainable_variables)
    assert [sorted(named) for named in found] == [["momentum", "velocity"]] * 4
    for variable, named in zip(model.trainable_variables, found, strict=True):
        assert all(slot.shape == variable.shape for slot in named.values())
        prefix = variable.path.replace("/", "_")
        assert all(slot.path.endswith(f"{prefix}_{name}") for name, slot in named.items())


def test_the_learning_rate_variable_is_found_and_a_schedule_has_none():
    opt = keras.optimizers.SGD(0.25)
    rate = _compat.learning_rate_variable(opt)
    opt.learning_rate = 0.5  # what LearningRateScheduler does
    assert float(np.asarray(rate)) == 0.5 and rate in opt.variables
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    assert _compat.learning_rate_variable(keras.optimizers.SGD(schedule)) is None


def test_backup_and_restore_asks_for_its_epoch_through_the_model(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    backup = keras.callbacks.BackupAndRestore(str(tmp_path))
    backup.set_model(model)
    backup.on_epoch_end(2)  # saves: the fit would go on at epoch 3
    fresh = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    fresh.compile(optimizer="sgd", loss="mse")
    again = keras.callbacks.BackupAndRestore(str(tmp_path))
    again.set_model(fresh)
    again.on_train_begin()
    assert _compat.initial_epoch_set_by_callbacks(fresh) == 3
    assert _compat.initial_epoch_set_by_callbacks(fresh) is None  # cleared once read


def test_every_traced_concrete_function_is_listed():
    @tf.function
    def double(x):
        return 2 * x

    double(tf.constant(1.0))
    double(tf.constant([1.0, 2.0]))
    assert len(_compat.concrete_functions(double)) == 2


def test_the_filtered_warning_is_still_tensorflows_text():
    from tensorflow.python.distribute import parameter_server_strategy_v2

    assert _compat.SCHEDULE_WARNING in inspect.getsource(parameter_server_strategy_v2)


def test_the_worker_failure_log_is_still_the_coordinators_text():
    from tensorflow.python.distribute.coordinator import cluster_coordinator

    assert f'logging.error("{_compat.WORKER_FAILED_LOG}"' in inspect.getsource(cluster_coordinator)


def test_per_worker_values_still_hold_each_workers_remote_value():
    import tensorflow as tf
    from tensorflow.python.distribute.coordinator.values import RemoteValueImpl

    from ralp._compat.coordinator import every_worker_done

    made, pending = RemoteValueImpl(None, None), RemoteValueImpl(None, None)
    made._set_values(tf.constant(1))
    PerWorkerValues = tf.distribute.experimental.coordinator.PerWorkerValues
    assert every_worker_done(PerWorkerValues((made, made)))
    assert not every_worker_done(PerWorkerValues((made, pending)))


def test_a_call_time_value_is_still_a_placeholder_of_the_function():
    """The worker's index is a placeholder of the function, fed as it is called (the dispatch
    context's worker: on a cluster, tests/ps_strategy/test_step_timeout.py)."""
    import tensorflow as tf
    from tensorflow.python.distribute.coordinator import coordinator_context
    from tensorflow.python.framework.func_graph import FuncGraph

    from ralp._compat.coordinator import current_worker_index

    assert coordinator_context.get_current_dispatch_context() is None
    with FuncGraph("canary").as_default():
        index = current_worker_index([tf.constant(k, tf.int64) for k in range(2)])
    assert index.op.type == "Placeholder" and index.dtype == tf.int64


def _coordinator_canaries(spec) -> dict:
    """In a fresh process on a cluster of 1 worker and 2 PS tasks."""
    import time

    import tensorflow as tf

    from ralp._compat import colocating_creator, remote_value_done
    from ralp._compat.coordinator import trace_as_scheduled
    from ralp.ps_strategy.connect import connect

    connection = connect(spec)
    with tf.device("/job:ps/replica:0/task:1/device:CPU:0"):
        anchor = tf.Variable(0, name="anchor")
    with connection.strategy.scope():
        plain = [tf.Variable(1.0, name=f"plain{k}") for k in range(2)]
        with tf.variable_creator_scope(colocating_creator(anchor)):
            pinned = [tf.Variable(1.0, name=f"pinned{k}") for k in range(3)]

    @tf.function
    def slow():
        return tf.reduce_sum(tf.random.uniform((2000, 2000)) @ tf.random.uniform((2000, 2000)))

    trace_as_scheduled(connection.coordinator, slow, ())
    traced = slow.experimental_get_tracing_count()
    remote = connection.coordinator.schedule(slow)  # finds it traced
    early = remote_value_done(remote)
    deadline = time.monotonic() + 60
    while not remote_value_done(remote) and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"plain": [v.device for v in plain], "pinned": [v.device for v in pinned],
            "early": early, "done": remote_value_done(remote), "value": float(remote.fetch()),
            "tracings": (traced, slow.experimental_get_tracing_count())}


@pytest.mark.cluster
def test_coordinator_internals_on_a_real_cluster():
    from ralp import LocalCluster, run_in_fresh_process

    with LocalCluster(workers=1, ps=2) as cluster:
        out = run_in_fresh_process(_coordinator_canaries, cluster.spec, timeout=300)
    ps = [f"/job:ps/replica:0/task:{k}/device:CPU:0" for k in range(2)]
    assert out["plain"] == ps  # PSS' own round-robin
    assert out["pinned"] == [ps[1]] * 3  # colocate_with wins over it
    assert out["early"] is False and out["done"] is True and out["value"] > 0
    assert out["tracings"] == (1, 1)  # traced as schedule traces it


_PROFILE_MATMULS = """
import glob, sys, time
import tensorflow as tf
from ralp import _compat

@tf.function
def work(a):
    return tf.reduce_sum(tf.matmul(a, a))

x = tf.ones((64, 64))
work(x)
before = time.time()
tf.profiler.experimental.start(sys.argv[1])
for _ in range(3):
    work(x).numpy()
done = time.time()
tf.profiler.experimental.stop()
(path,) = glob.glob(sys.argv[1] + "/**/*.xplane.pb", recursive=True)
# On CPUs with oneDNN custom ops TensorFlow rewrites MatMul to _MklMatMul: the name keeps
# the graph's op name ("MatMul:_MklMatMul"), the type is the kernel's.
events = list(_compat.read_xspace_events(path))
matmuls = [e for e in events if e.op_type.endswith("MatMul")]
assert len(matmuls) >= 3 and all(e.seconds >= 0 for e in matmuls), [e.name for e in events]
assert all(e.name == "MatMul:" + e.op_type for e in matmuls)  # "scope/op:Type", as parsed
# the events count from the trace's start: on the epoch's clock they fall inside the trace
start = _compat.xspace_start_time(path)
assert before - 0.01 <= start <= done, (before, start, done)
assert all(before - 0.01 <= start + e.start <= done + 0.01 for e in matmuls), (start, done)
"""


def test_profiler_traces_can_be_read(tmp_path):
    # In a fresh interpreter: once a process has run an XLA-compiled function (the grouped
    # convolution canary above does), TensorFlow's profiler records no host events in it.
    run = subprocess.run([sys.executable, "-c", _PROFILE_MATMULS, str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


def test_a_traced_cond_keeps_its_branch_graphs():
    v = tf.Variable(1.0)

    @tf.function
    def step(x):
        return tf.cond(x > 0, lambda: v.assign_add(x * 2.0), lambda: tf.identity(v))

    graph = step.get_concrete_function(tf.TensorSpec([], tf.float32)).graph
    [cond] = [op for op in graph.get_operations() if op.type in ("If", "StatelessIf")]
    then_graph, else_graph = _compat.cond_branch_graphs(cond)
    assert len(then_graph.inputs) == len(cond.inputs) - 1 == len(else_graph.inputs)
    assert "AssignAddVariableOp" in {op.type for op in then_graph.get_operations()}
    inlined = _compat.INLINED_BRANCH_OP.fullmatch("step/cond/then/_12/step/cond/mul")
    assert (inlined["cond"], inlined["branch"], inlined["inner"]) == (
        "step/cond", "then", "step/cond/mul")


def test_the_coordination_services_store_is_on_the_eager_context():
    # exercised for real by every collective job (tests/collective, tests/planner/
    # test_collective_cost.py): here, that both calls exist with the blocking get
    put, get = _compat.coordination_key_values()
    assert put.__name__ == "set_config_key_value" and get.__name__ == "get_config_key_value"
    assert list(inspect.signature(get).parameters) == ["key", "timeout_in_ms"]


def test_autograph_sources_are_its_prefixed_modules_and_can_be_removed():
    import os

    @tf.function
    def branchy(x):
        if x > 0:  # a Python if on a tensor: AutoGraph converts it
            return x * 2.0
        return -x

    assert float(branchy(tf.constant(1.0))) == 2.0
    paths = [m.__file__ for name, m in list(sys.modules.items())
             if name.startswith(_compat.AUTOGRAPH_MODULE_PREFIX)]
    assert any(os.path.exists(p) for p in paths), "AutoGraph no longer writes such modules"
    assert _compat.remove_autograph_sources() >= 1
    assert not any(os.path.exists(p) for p in paths)
    # the converted code stays loaded: a retrace (a new dtype) still runs it
    assert float(branchy(tf.constant(-3.0, tf.float64))) == 3.0


def test_compile_resolves_accuracy_and_crossentropy_by_the_labels_shape():
    sparse = keras.KerasTensor((None,), dtype="int32")
    onehot = keras.KerasTensor((None, 3), dtype="float32")
    probabilities = keras.KerasTensor((None, 3), dtype="float32")
    metrics = _compat.compile_metrics(["accuracy"], ["acc"], sparse, probabilities)
    kinds = [type(m).__name__ for m in metrics.metrics]
    assert kinds == ["SparseCategoricalAccuracy", "SparseCategoricalAccuracy"]
    assert list(metrics.stateless_result([v.numpy() for v in metrics.variables])) == [
        "accuracy", "acc"]
    loss = _compat.compiled_loss("crossentropy", onehot, probabilities)
    assert loss.fn is keras.losses.categorical_crossentropy
    values, weights = _compat.same_rank(tf.zeros((4, 1)), tf.ones((4,)))
    assert values.shape == weights.shape


def test_a_softmax_output_keeps_its_logits_when_sliced():
    logits = tf.constant([[30.0, 0.0, 0.0], [0.0, 0.0, 40.0]])
    out = keras.activations.softmax(logits)
    assert hasattr(out, "_keras_logits")  # what Keras' cross-entropy computes from
    rows = _compat.rows_of_predictions(out, 1)
    np.testing.assert_allclose(rows._keras_logits.numpy(), logits.numpy()[:1])
    loss = keras.losses.sparse_categorical_crossentropy(tf.constant([1]), rows)
    assert float(loss[0]) == pytest.approx(30.0, rel=1e-5)  # unclipped (clipped: 16.1)


def test_a_dataset_travels_as_its_graph():
    ds = tf.data.Dataset.range(5).map(lambda v: v * 2)
    again = _compat.dataset_from_graph(_compat.dataset_graph(ds), ds.element_spec)
    assert [int(v) for v in again] == [0, 2, 4, 6, 8]


def test_tensorflow_can_be_started_again_for_its_collectives():
    code = ("import keras, tensorflow as tf\nfrom ralp import _compat\n"
            "keras.mixed_precision.set_global_policy('mixed_bfloat16')\n"
            "m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])\n"
            "assert _compat.eager_context_started()\n"
            "with _compat.restart_tensorflow():\n"
            "    s = tf.distribute.MultiWorkerMirroredStrategy()\n"
            "assert keras.mixed_precision.global_policy().name == 'mixed_bfloat16'\n"
            "print('ok', s.num_replicas_in_sync)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "ok 1" in done.stdout, done.stderr[-2000:]
