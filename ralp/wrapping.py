"""``ralp.wrap``: one entry point for every mode, returning the one trainer.

It reads the user's model (its compiled set-up, its weights) before anything connects,
resolves mode "auto" with the planner, builds the mode's runtime and hands back a
:class:`ralp.training.trainer.Trainer`:

- parameter-server modes ("auto", "skewness", "ralp", "ps"): in the coordinator, with the
  cluster (:mod:`ralp.ps_strategy.runtime`);
- allreduce modes ("horovod", "stanza", "collective"): in every rank of a job its launcher
  started (``horovodrun``; ``TF_CONFIG`` for "collective"), every rank running the same script
  (:mod:`ralp.horovod.runtime`, :mod:`ralp.horovod.stanza`, :mod:`ralp.collective.runtime`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ralp.defaults import DEFAULT_BATCH_SIZE, DEFAULT_RESTART_TIMEOUT_S, DEFAULT_THRESHOLD
from ralp.errors import InvalidArgumentError, InvalidTypeError, warn
from ralp.modes import AUTO, COLLECTIVE, PS_FAMILY, WRAP_MODES, load
from ralp.training.compile import optimizer_factory, training_setup
from ralp.training.optimizer_state import read_compiled
from ralp.training.trainer import Trainer

PS_MODES = tuple(m.name for m in WRAP_MODES.values() if m.family == PS_FAMILY)
RANK_MODES = tuple(m.name for m in WRAP_MODES.values() if m.family != PS_FAMILY)
MODES = PS_MODES + RANK_MODES


class PlacementWarning(UserWarning):
    """RALP was asked for (mode "skewness") but the model trains on plain PS; says why."""


@dataclass(frozen=True)
class Failures:
    """How training meets a slow or lost task.

    Attributes:
        connect_timeout: seconds to wait for an unreachable cluster before failing (PS modes).
        step_timeout: seconds without a finished step (PS modes) or a collective that takes
            longer (mode "collective") before training fails. In the PS modes every worker's
            first step of a fit (which also traces the step, sends the workers its graph and
            their data and optimizes the graph there) may take 5 times as long.
        restart_timeout: seconds ``fit`` waits for a lost task to be restarted before it
            goes on from the last checkpoint (PS modes, with a ``checkpoint_dir``).
    """

    connect_timeout: float = 10.0
    step_timeout: float = 120.0
    restart_timeout: float = DEFAULT_RESTART_TIMEOUT_S


def wrap(model, cluster=None, *, mode: str = AUTO, optimizer=None, loss=None, metrics=None,
         batch_size: int | None = None, plan=None, bandwidth: str | None = None,
         calibration=None, threshold: float = DEFAULT_THRESHOLD, sync=None,
         pulls: str = "default", failures: Failures | None = None, device_type: str = "cpu",
         fc_workers: int = 1) -> Trainer:
    """Train a Keras model with one of ralp's modes: returns a trainer with Keras' ``fit``,
    ``evaluate`` and ``predict``, and ``unwrap()`` back to a plain Keras model.

    Args:
        model: a Sequential or functional Keras model with one output (or a trainer, to train
            its current weights in another mode). Its compiled optimizer, loss and metrics
            are used; the model itself is left as it was.
        cluster: the parameter-server cluster (PS modes): a ``ralp.ClusterSpec`` or a mapping
            ``{"chief": [...], "worker": [...], "ps": [...]}``. None in the allreduce modes,
            whose launcher makes the job.
        mode: "auto" (default): the planner predicts plain PS and RALP on this cluster and
            trains the faster (RALP only where it is predicted faster by more than 5% and
            moves at least 5% fewer bytes; on a cluster whose every task is on this host,
            with their CPUs shared and their bytes costing CPU). "skewness": the RALP paper's rule. "ralp": place
            the layers after the profiler's split (or ``plan``) on the PS. "ps": plain
            ParameterServerStrategy. "horovod": Horovod's ring allreduce. "stanza": CONV
            ranks allreduce, ``fc_workers`` FC ranks hold the layers after the split.
            "collective": TensorFlow's own collectives (MultiWorkerMirroredStrategy).
        optimizer, loss, metrics: replace the compiled model's (default without a compile:
            SGD with momentum, sparse categorical cross-entropy, "accuracy").
        batch_size: ``fit``'s default global batch (the samples of one update), which the
            placement and mode "auto" are planned for; default 32.
        plan: a ``ralp.Plan`` to place by (modes "ralp" and "stanza").
        bandwidth, calibration: mode "auto": the links' rate (tc style; default "10gbit",
            assumed and said so, or loopback's where every task is on this host) and a
            ``ralp.Calibration`` or its path.
        threshold: the skewness rule's K (mode "skewness", and its verdict beside "auto").
        sync: PS modes: None (ParameterServerStrategy's asynchronous schedule), "bsp",
            "asp", "ssp:S", "dssp:L:U", or a ``ralp.SyncPolicy``.
        pulls: PS modes: how workers pull their variables: "default", "layer" or "ibatch".
        failures: a ``ralp.Failures`` (timeouts for lost and slow tasks).
        device_type: PS modes: "cpu" or "gpu" (each task uses its GPU).
        fc_workers: mode "stanza": the FC ranks (the last ones of the job).

    Returns:
        A ``ralp.Trainer``.

    Raises:
        ralp.InvalidArgumentError: an unknown mode, or a setting the mode does not take.
        ralp.ClusterError: the cluster is unreachable or misconfigured.
        ralp.PlannerError: mode "auto" with a bad bandwidth or calibration.
        ralp.PlanError, ralp.ProfileError, ralp.TrainingSetupError, ralp.SyncError,
            ralp.StanzaError, ralp.CollectiveError: a plan, model, training set-up,
            paradigm or job that cannot be used.
    """
    if mode not in MODES:
        raise InvalidArgumentError(f"mode {mode!r}: choose from {', '.join(map(repr, MODES))}")
    failures = failures or Failures()
    if not isinstance(failures, Failures):
        raise InvalidTypeError(f"failures must be a ralp.Failures, got {type(failures).__name__}")
    _check_settings(mode, cluster, plan, bandwidth, calibration, sync, pulls, device_type,
                    fc_workers)
    if isinstance(model, Trainer):
        model = model.unwrap()
    if mode in RANK_MODES:
        return _rank_trainer(model, mode, optimizer, loss, metrics, batch_size, plan,
                             failures, fc_workers)
    return _ps_trainer(model, cluster, mode, optimizer, loss, metrics, batch_size, plan,
                       bandwidth, calibration, threshold, sync, pulls, failures, device_type)


def _check_settings(mode, cluster, plan, bandwidth, calibration, sync, pulls, device_type,
                    fc_workers) -> None:
    given = {"sync": sync is not None, "pulls": pulls != "default",
             "device_type": device_type != "cpu", "cluster": cluster is not None,
             "bandwidth": bandwidth is not None, "calibration": calibration is not None,
             "fc_workers": fc_workers != 1, "plan": plan is not None}
    takes = {name: tuple(m.name for m in WRAP_MODES.values() if name in m.takes)
             for name in given}
    for name, is_given in given.items():
        if is_given and mode not in takes[name]:
            hint = (" (an allreduce job's launcher makes its cluster: horovodrun, or TF_CONFIG "
                    f"for {COLLECTIVE!r})" if name == "cluster" else "")
            raise InvalidArgumentError(f"{name}= is for mode {' or '.join(takes[name])}; mode "
                                       f"{mode!r} does not take it{hint}")
    if mode in PS_MODES and cluster is None:
        raise InvalidArgumentError(f"mode {mode!r} trains on a parameter-server cluster: give "
                                   "cluster= (a ralp.ClusterSpec, or ralp.LocalCluster().spec)")
    if device_type not in ("cpu", "gpu"):
        raise InvalidArgumentError(f"device_type must be 'cpu' or 'gpu', got {device_type!r}")


def _ps_trainer(model, cluster, mode, optimizer, loss, metrics, batch_size, plan, bandwidth,
                calibration, threshold, sync, pulls, failures, device_type) -> Trainer:
    from ralp.cluster.spec import ClusterSpec
    from ralp.placement.choose import check_placeable, choose_plan
    from ralp.placement.pull_schedule import SCHEDULES
    from ralp.placement.rewriter import snapshot_state
    from ralp.ps_strategy.connect import connect
    from ralp.ps_strategy.pull_profile import layer_forward_times
    from ralp.ps_strategy.staleness import as_policy

    if not isinstance(cluster, ClusterSpec):
        cluster = ClusterSpec.from_dict(cluster)
    if pulls not in SCHEDULES:
        raise InvalidArgumentError(f"pulls must be one of {', '.join(SCHEDULES)}, got {pulls!r}")
    check_placeable(model, mode, plan)
    setup = training_setup(model, optimizer, loss, metrics, where="ralp.wrap")
    policy = as_policy(sync)
    workers = len(cluster.workers)
    global_batch = batch_size or DEFAULT_BATCH_SIZE
    # the placement is planned for one worker's batch
    per_worker = max(1, global_batch // workers) if policy and policy.paradigm == "bsp" \
        else global_batch
    auto = None
    if mode == AUTO:
        auto = _auto_choice(model, cluster, bandwidth, calibration, per_worker, threshold)
        mode = auto.mode
    # Variables made before PSS connects this process are unreadable afterwards: read first.
    state = snapshot_state(model)
    forward_times = layer_forward_times(model, per_worker) if pulls == "ibatch" else None
    make_optimizer = optimizer_factory(setup.optimizer)
    optimizer_state = read_compiled(setup.optimizer, model)
    connection = connect(cluster, timeout=failures.connect_timeout)
    choice = choose_plan(model, mode, workers=connection.num_workers, num_ps=connection.num_ps,
                         plan=plan, batch_size=per_worker, threshold=threshold)
    if choice.warning:
        warn(choice.warning, PlacementWarning)
    runtime = load(WRAP_MODES[mode].runtime)(model, connection, choice.plan, profile=choice.profile,
                        make_optimizer=make_optimizer, state=state, device_type=device_type,
                        sync=policy, step_timeout=failures.step_timeout,
                        restart_timeout=failures.restart_timeout, pulls=pulls,
                        forward_times=forward_times, optimizer_state=optimizer_state)
    return Trainer(runtime, setup, model, batch_size=batch_size, auto=auto)


def _auto_choice(model, cluster, bandwidth, calibration, batch_size, threshold):
    from ralp.planner.auto import choose_for_cluster, estimate_for_cluster

    if calibration is None:
        return estimate_for_cluster(model, cluster, bandwidth, batch_size=batch_size,
                                    threshold=threshold)
    return choose_for_cluster(model, cluster, bandwidth, calibration, batch_size=batch_size,
                              threshold=threshold)


def _rank_trainer(model, mode, optimizer, loss, metrics, batch_size, plan, failures,
                  fc_workers) -> Trainer:
    make = load(WRAP_MODES[mode].runtime)
    return make(model, optimizer, loss, metrics, batch_size=batch_size, plan=plan,
                step_timeout=failures.step_timeout, fc_workers=fc_workers)
