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
``coordinator``'s three       ``PerWorkerValues._values``, call-time values,  ps_strategy
                                ``schedule``'s tracing (``cluster_coordinator``'s
                                ``_maybe_as_type_spec``, ``_select_worker_slice``)
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

from ralp._compat._checks import *  # noqa: F403
from ralp._compat._checks import _require  # noqa: F401
from ralp._compat.keras import *  # noqa: F403
from ralp._compat.tensorflow import *  # noqa: F403
