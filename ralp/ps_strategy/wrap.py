"""``wrap``: place a Keras model on a PS cluster and hand back a :class:`Trainer`.

It reads the user's model before connecting (ParameterServerStrategy makes variables created
earlier unreadable), chooses the plan (:mod:`ralp.placement.choose`) on the cluster's shape,
and builds the trainer (:mod:`ralp.ps_strategy.trainer`) that clones the model into the
strategy's scope.
"""

from __future__ import annotations

import keras

from ralp.cluster.spec import ClusterSpec
from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_THRESHOLD
from ralp.errors import InvalidArgumentError, warn
from ralp.placement.choose import check_placeable, choose_plan
from ralp.placement.plan import Plan
from ralp.placement.pull_schedule import SCHEDULES as PULL_SCHEDULES
from ralp.placement.rewriter import snapshot_state
from ralp.ps_strategy.connect import connect
from ralp.ps_strategy.pull_profile import layer_forward_times
from ralp.ps_strategy.staleness import SyncPolicy, as_policy
from ralp.ps_strategy.sync import SlowWorker
from ralp.ps_strategy.trainer import Trainer
from ralp.training.compile import BatchMetrics, optimizer_factory, training_setup


class PlacementWarning(UserWarning):
    """RALP was asked for (mode "skewness") but the model trains on plain PS; says why."""



def wrap(
    model: keras.Model,
    cluster: ClusterSpec,
    *,
    mode: str = "skewness",
    plan: Plan | None = None,
    optimizer=None,
    loss=None,
    metrics=None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threshold: float = DEFAULT_THRESHOLD,
    device_type: str = "cpu",
    connect_timeout: float = 10.0,
    step_timeout: float = 120.0,
    sync: str | SyncPolicy | None = None,
    staleness=None,
    slow_worker: str | SlowWorker | None = None,
    pull_schedule: str = "default",
) -> Trainer:
    """Place ``model`` on ``cluster`` and return a :class:`Trainer` with ``fit``.

    ``mode``: "ps" (plain ParameterServerStrategy), "ralp" (offload the layers after the
    profiler's split, or ``plan``), or "skewness" (the paper's rule decides; a model with
    nothing worth offloading trains on plain PS with a :class:`PlacementWarning` saying why).
    "auto" (the planner's predicted-throughput choice) is resolved by the public
    ``ralp.wrap`` (:func:`ralp.planner.auto.wrap`) before it calls this.

    ``optimizer``, ``loss`` and ``metrics`` default to the model's own when it was compiled
    (``model.compile(...)``), else to SGD with momentum, sparse categorical cross-entropy on
    the model's logits (or its softmax probabilities) and no extra metrics
    (:mod:`ralp.training.compile`). Labels are integer class ids. A model with several
    outputs is refused.

    ``sync`` picks the synchronization paradigm (:mod:`ralp.ps_strategy.sync`): None (the
    default) is ParameterServerStrategy's own asynchronous scheduling; "bsp", "asp", "ssp"
    (``staleness=s``) and "dssp" (``staleness=(s_L, s_U)``) run one driver per worker with
    the bound enforced. ``slow_worker="INDEX:FACTOR"`` (or ``"INDEX:+SECONDS"``, a fixed delay per
    step) slows one worker down (heterogeneity).

    ``pull_schedule`` says how workers pull the variables of the layers they run
    (:mod:`ralp.placement.pull_schedule`): "default" (ParameterServerStrategy's own: every
    variable a receive of its own, all at once), "layer" (one message per layer, one after
    the other) or "ibatch" (iBatch's greedy batches, from per-layer forward times measured
    here before connecting and the pull cost measured on the cluster). ``trainer.plan``
    shows the batches.

    Run this in the coordinator (chief) process, once per process: ParameterServerStrategy
    connects the whole process to the cluster. Wrapping a ``Trainer`` again with the same
    settings returns it unchanged; with other settings it re-places its current weights.
    """
    if isinstance(model, Trainer):
        if model.connection.spec == cluster and mode == model.mode and plan in (None, model.plan):
            return model
        model = model.unwrap()
    check_placeable(model)
    setup = training_setup(model, optimizer, loss, metrics, where="ralp.wrap")
    policy = as_policy(sync, staleness)
    if isinstance(slow_worker, str):
        slow_worker = SlowWorker.parse(slow_worker)
    if device_type not in ("cpu", "gpu"):
        raise InvalidArgumentError(f"device_type must be 'cpu' or 'gpu', got {device_type!r}")
    if pull_schedule not in PULL_SCHEDULES:
        raise InvalidArgumentError(f"pull_schedule must be one of {', '.join(PULL_SCHEDULES)}, "
                         f"got {pull_schedule!r}")
    # Variables made before PSS connects this process are unreadable afterwards: read first.
    state = snapshot_state(model)
    forward_times = layer_forward_times(model, batch_size) if pull_schedule == "ibatch" else None
    compile_config = model.get_compile_config() if getattr(model, "compiled", False) else None
    optimizer = optimizer_factory(setup.optimizer)
    batch_metrics = BatchMetrics(setup.metrics)
    connection = connect(cluster, timeout=connect_timeout)
    choice = choose_plan(model, mode, workers=connection.num_workers, num_ps=connection.num_ps,
                         plan=plan, batch_size=batch_size, threshold=threshold)
    if choice.warning:
        warn(choice.warning, PlacementWarning)
    resolved = "ps" if choice.plan.is_empty else "ralp"
    return Trainer(model, connection, choice.plan, mode=resolved, profile=choice.profile,
                   optimizer=optimizer, loss=setup.loss, metrics=batch_metrics,
                   device_type=device_type,
                   step_timeout=step_timeout, state=state, sync=policy,
                   slow_worker=slow_worker, pull_schedule=pull_schedule,
                   forward_times=forward_times, compile_config=compile_config)
