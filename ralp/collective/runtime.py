"""Data-parallel training of a Keras 3 model with TensorFlow's own collectives
(``tf.distribute.MultiWorkerMirroredStrategy``): allreduce without a compiled Horovod.

Every worker process runs the same program with its ``TF_CONFIG``. The strategy starts the
worker's gRPC server in this process and must come before any other TensorFlow work (it
configures the collective ops at the context's start), so the trainer takes a function that
builds the model and calls it inside the strategy's scope: variables are then mirrored, and the
strategy broadcasts every initial value from worker 0, so all replicas start the same.

Each step runs one replica step per worker (``strategy.run``): the worker's own batch forward
and backward, the sums over the workers (over the strategy's ring on CPU, NCCL on GPUs), and
the optimizer's update, the same everywhere. The loss each replica differentiates is its share
of the global batch's mean, so the sum is the global batch's gradient.

The sums start while the backward pass runs, as PyTorch's DistributedDataParallel starts
them: the gradients in size-bounded buckets in backward order (:mod:`ralp.collective.buckets`),
one all-reduce per bucket, each depending only on its own gradients (and the loss's divisor,
which rides in the first). TensorFlow runs a replica's collectives in the order the step issues
them (each waits for the one before: their ordering token), so the buckets are issued in
backward order and the last layers' sum crosses while the first layers' gradients are
computed. The sums are of the gradients themselves; each is divided by the summed divisor
afterwards. The optimizer then applies the summed gradients as they are
(:func:`ralp._compat.apply_summed_gradients`): Keras 3's TensorFlow optimizer would otherwise
sum them again, all at once, after the backward pass. Clipping (``clipnorm``...) sees the
summed gradient, as in one Keras process.

Keras 3 notes: Keras' own ``fit`` fails under this strategy (keras-team/keras issue 20585), so
``fit`` here is ralp's own loop (:mod:`ralp.training.fit_loop`); the optimizer is built
eagerly in the scope before the first traced step, as Keras' ``fit`` does (a stateful optimizer
first built inside a distributed ``tf.function`` fails in Keras 3.15: keras-team/keras issue
23085).
"""

from __future__ import annotations

import itertools

import numpy as np

from ralp._compat import apply_summed_gradients
from ralp.collective.buckets import backward_buckets
from ralp.errors import InvalidArgumentError, InvalidTypeError, RalpError
from ralp.training.ranks import RankRuntime

IMPLEMENTATIONS = ("auto", "ring", "nccl")


class CollectiveError(RalpError, RuntimeError):
    """The collective job could not start or a collective failed; the message says why.
    ``worker``: the worker whose failure ended the job, where known."""

    worker: int | None = None


def tensorflow_started() -> bool:
    """Whether TensorFlow has started in this process (after which its collectives can be
    configured only by starting it again)."""
    from ralp._compat import eager_context_started

    return eager_context_started()


_STRATEGY: list = []  # this process's strategy: TensorFlow configures its collectives once
# keys of the coordination service's store this process used: every worker counts alike
_KEYS = {"share": itertools.count(1), "leave": itertools.count(1)}


def make_strategy(implementation: str = "auto", timeout_s: float | None = None,
                  restart: bool = False):
    """``MultiWorkerMirroredStrategy`` from this process's ``TF_CONFIG``: before any other
    TensorFlow work, or with ``restart`` after it (everything TensorFlow and Keras made in this
    process is gone then). Blocks until every worker has joined. A process has one: later
    calls return it."""
    if implementation not in IMPLEMENTATIONS:
        raise InvalidArgumentError(f"implementation must be one of {', '.join(IMPLEMENTATIONS)}, "
                                   f"got {implementation!r}")
    if _STRATEGY:
        return _STRATEGY[0]
    _STRATEGY.append(_new_strategy(implementation, timeout_s, restart))
    return _STRATEGY[0]


def _new_strategy(implementation: str, timeout_s: float | None, restart: bool):
    import tensorflow as tf

    comm = tf.distribute.experimental.CommunicationImplementation[implementation.upper()]
    options = tf.distribute.experimental.CommunicationOptions(implementation=comm,
                                                              timeout_seconds=timeout_s)
    if restart:
        from ralp._compat import restart_tensorflow

        with restart_tensorflow():
            return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except RuntimeError as e:
        if "program startup" in str(e):
            raise CollectiveError("the collective strategy must be made before any other "
                                  "TensorFlow work in this process (TensorFlow configures its "
                                  "collectives when it starts), or with restart=True") from None
        raise


class CollectiveRuntime(RankRuntime):
    """Trains a Keras model data-parallel over this job's workers (the module's docstring).
    Make it with :meth:`from_model` (``ralp.wrap(model, mode="collective")``)."""

    mode = "collective"
    timeout_s: float | None = None  # each collective's (ralp.Failures(step_timeout=...))

    def __init__(self, strategy, model, make_optimizer, setup, weights: list | None = None,
                 optimizer_state=None):
        super().__init__()
        self.strategy, self.setup = strategy, setup
        check_one_replica_per_worker(strategy)
        from ralp.training.compile import clone_uncompiled

        in_scope = bool(model.weights) and all(
            strategy.extended.variable_created_in_scope(w.value) for w in model.weights)
        with strategy.scope():
            self.model = model if in_scope else clone_uncompiled(model)
            self.optimizer = apply_summed_gradients(make_optimizer())  # the step sums them
            self.optimizer.build(self.model.trainable_variables)
        self.original = self.model
        self._reducers: dict = {}
        if not in_scope:  # worker 0's weights on every worker, as the scope's creation does
            self._from_worker0(model.get_weights() if weights is None else weights)
        if optimizer_state is not None:  # the wrapped model's optimizer, mid-training
            self.set_state(None, optimizer_state)

    @classmethod
    def from_model(cls, model, optimizer=None, loss=None, metrics=None, *,
                   implementation: str = "auto", timeout_s: float | None = None,
                   strategy=None) -> CollectiveRuntime:
        """The runtime for ``model`` (or a function that builds it, called in the strategy's
        scope). TensorFlow configures its collectives when it starts; a model built before
        (TensorFlow started) is read to numpy, TensorFlow is started again
        (:func:`ralp._compat.restart_tensorflow`) and the model made anew in the strategy's
        scope: the model object given is not usable afterwards (``trainer.unwrap()`` is)."""
        import keras

        from ralp.training.compile import optimizer_factory, training_setup
        from ralp.training.optimizer_state import read_compiled

        built = model if isinstance(model, keras.Model) else None
        if built is None and not callable(model):
            raise InvalidTypeError(f"mode 'collective' takes a keras.Model or a function that "
                                   f"builds one, got {type(model).__name__}")
        # An optimizer or metrics made before TensorFlow restarts are read now (their
        # variables are gone after it).
        state = None
        if isinstance(optimizer, keras.optimizers.Optimizer):
            state = read_compiled(optimizer, built) if built is not None else None
            optimizer = optimizer_factory(optimizer)
        if metrics is not None:
            metrics = [keras.saving.serialize_keras_object(m)
                       if isinstance(m, keras.metrics.Metric) else m for m in metrics]
        snapshot = None
        if strategy is None:
            restart = tensorflow_started() and not _STRATEGY
            if built is not None and restart:  # read the model before TensorFlow restarts
                setup = training_setup(built, optimizer, loss, metrics, where="ralp.wrap")
                make_optimizer = optimizer_factory(setup.optimizer)
                state = state or read_compiled(setup.optimizer, built)
                snapshot = built.get_weights()
            strategy = make_strategy(implementation, timeout_s, restart=restart)
        if built is None:
            with strategy.scope():
                built = model()
            if not isinstance(built, keras.Model):
                raise InvalidTypeError(f"the function returned {type(built).__name__}, not a "
                                       "keras.Model")
        if snapshot is None:
            setup = training_setup(built, optimizer, loss, metrics, where="ralp.wrap")
            make_optimizer = optimizer_factory(setup.optimizer)
            state = state or read_compiled(setup.optimizer, built)
        runtime = cls(strategy, built, make_optimizer, setup, weights=snapshot,
                      optimizer_state=state)
        runtime.timeout_s = timeout_s
        return runtime

    @property
    def size(self) -> int:
        return int(self.strategy.num_replicas_in_sync)

    @property
    def rank(self) -> int:
        resolver = self.strategy.cluster_resolver
        return int(resolver.task_id or 0) if resolver is not None else 0

    data_index = property(lambda self: self.rank)
    data_workers = property(lambda self: self.size)

    def _build(self, objective, data) -> None:
        import tensorflow as tf

        from ralp.training.data import own, unpack
        from ralp.training.objective import plus, regularization_gradients

        strategy, model, optimizer = self.strategy, self.model, self.optimizer
        variables = model.trainable_variables
        share = 1.0 / self.size
        self.buckets = backward_buckets([_gradient_bytes(v) for v in variables])

        def replica_step(batch):
            x, y, weights, rows = unpack(batch)
            with tf.GradientTape() as tape:
                predictions = model(x, training=True)
                y, predictions, weights = own(rows, y, predictions, weights)
                num, den = objective.loss_sums(y, predictions, weights, share)
            grads = tape.gradient(num, variables)
            summed, total = _summed(self.buckets, grads, den)
            reg, reg_grads = regularization_gradients(model, variables)
            summed = [plus(tf.math.divide_no_nan(g, tf.cast(total, g.dtype)), r)
                      for g, r in zip(summed, reg_grads, strict=True)]
            optimizer.apply_gradients(zip(summed, variables, strict=True))  # as they are
            states = objective.metric_states(y, predictions, weights)
            return objective.sums(num, den, tf.shape(predictions)[0], reg * share, states)

        @tf.function
        def train_step(batch):
            sums = strategy.run(replica_step, args=(batch,))
            return strategy.experimental_local_results(sums)[0]

        self.step_function = train_step  # the traced step, for audits of its graph
        self._train = lambda batch: np.asarray(self._collective(train_step, batch))

    def _collective(self, fn, *args):
        """``fn(*args)``, a function of collectives: one that timed out (TensorFlow's
        ``DeadlineExceededError``) is a :class:`CollectiveError` that names the setting."""
        import tensorflow as tf

        try:
            return fn(*args)
        except tf.errors.DeadlineExceededError as e:
            raise CollectiveError(
                f"a collective did not complete within {self.timeout_s or 0:g} s: another "
                "worker is hung, far too slow or did not reach it (if its steps are only this "
                "slow, raise ralp.Failures(step_timeout=...))") from e

    def _sum(self, array: np.ndarray) -> np.ndarray:
        """``array`` summed over every worker (the strategy's reduction; one traced function
        per shape, traced in the same order on every worker)."""
        import tensorflow as tf

        array = np.asarray(array, np.float64)
        if array.shape not in self._reducers:

            @tf.function
            def reduce(v):
                mine = self.strategy.run(tf.identity, args=(v,))  # on this worker's replica
                return self.strategy.reduce(tf.distribute.ReduceOp.SUM, mine, axis=None)

            self._reducers[array.shape] = reduce
        return np.asarray(self._collective(self._reducers[array.shape], tf.constant(array)))

    def finish(self) -> None:
        """Return once every worker is done with the fit's collectives (a worker leaving
        early could break another's last one)."""
        self.leave_together()

    def leave_together(self) -> None:
        """Return once every worker is done with its collectives (:func:`leave_together`)."""
        self.barrier()
        leave_together(self.rank, self.size, f"ralp/leave{next(_KEYS['leave'])}")

    def barrier(self) -> None:
        """Wait until every worker gets here."""
        self._sum(np.zeros(1))

    # ------------------------------------------------------------------ state

    def _read(self, variable) -> np.ndarray:
        """This worker's copy of a mirrored variable (no collective)."""
        return np.asarray(self.strategy.experimental_local_results(_backing(variable))[0])

    def set_state(self, weights, optimizer) -> None:
        """Worker 0's ``weights`` and optimizer state on every worker (a collective)."""
        if weights is not None:
            for variable, value in zip(self.model.weights, weights, strict=True):
                variable.assign(value)
        if optimizer is not None:
            optimizer.assign(self.optimizer, self.model.trainable_variables)
        named = self._checkpoint_variables()
        arrays = {key: (self._read(v) if self.rank == 0 else np.zeros(v.shape, _wire_dtype(v)))
                  for key, v in named}
        self._sum_into(named, arrays)

    def _checkpoint_variables(self) -> list:
        from ralp.training.rank_checkpoints import part_variables

        return part_variables("model", self.model.variables, self.optimizer)

    def checkpoint_fingerprint(self) -> dict:
        from ralp.training.rank_checkpoints import lockstep_fingerprint

        return lockstep_fingerprint(self.model, self.optimizer, "collective")

    def checkpoint_parts(self) -> dict[str, dict]:
        """What this worker writes of a checkpoint: worker 0 its replica (read from its own
        copy of each mirrored variable, so no collective runs on one worker only), the
        others nothing."""
        from ralp.training.rank_checkpoints import read_arrays

        if self.rank:
            return {}
        local = self.strategy.experimental_local_results
        return {"model": read_arrays(self._checkpoint_variables(),
                                     lambda v: local(_backing(v))[0].numpy())}

    def restore_parts(self, load) -> None:
        """Worker 0 reads the checkpoint; every worker gets its values: a sum over the workers
        of worker 0's values and the others' zeros (exact: x + 0 = x)."""
        from ralp.training.rank_checkpoints import assign_arrays

        named = self._checkpoint_variables()
        arrays = load("model") if self.rank == 0 else {
            key: np.zeros(v.shape, _wire_dtype(v)) for key, v in named}
        if self.rank == 0:
            assign_arrays(named, arrays, "model")  # checks every key and shape first
        self._sum_into(named, arrays)

    def _from_worker0(self, weights: list) -> None:
        """Set the model's weights to worker 0's ``weights`` on every worker (a collective)."""
        from ralp.training.rank_checkpoints import named_variables

        named = named_variables("model", self.model.weights)
        arrays = {key: (np.asarray(w) if self.rank == 0 else np.zeros(v.shape, _wire_dtype(v)))
                  for (key, v), w in zip(named, weights, strict=True)}
        self._sum_into(named, arrays)

    def _sum_into(self, named: list, arrays: dict) -> None:
        """Assign each variable of ``named`` the sum over the workers of ``arrays``' value."""
        import tensorflow as tf

        from ralp.training.rank_checkpoints import assign_arrays

        keys = [key for key, _ in named]
        values = [tf.constant(np.asarray(arrays[k]).astype(_wire_dtype(v)))
                  for k, (_, v) in zip(keys, named, strict=True)]
        summed = self._sum_tensors(values)
        assign_arrays(named, {k: np.asarray(t).astype(np.dtype(v.dtype)) for k, t, (_, v)
                              in zip(keys, summed, named, strict=True)}, "model")

    def _sum_tensors(self, values: list) -> list:
        import tensorflow as tf

        strategy = self.strategy

        @tf.function
        def reduce(values):
            mine = strategy.run(lambda *v: [tf.identity(t) for t in v], args=tuple(values))
            return [strategy.reduce(tf.distribute.ReduceOp.SUM, m, axis=None) for m in mine]

        return [t.numpy() for t in reduce(values)]

    def share_text(self, text: str) -> str:
        """Worker 0's ``text`` on every worker (the coordination service's store)."""
        from ralp._compat import coordination_key_values

        put, get = coordination_key_values()
        key = f"ralp/share/{next(_KEYS['share'])}"
        if self.rank == 0:
            put(key, text)
            return text
        return get(key)


def check_one_replica_per_worker(strategy) -> None:
    """Refuse workers that each hold several devices: each worker feeds its own rows to one
    replica (several would all get the same rows)."""
    resolver = strategy.cluster_resolver
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    workers = max(1, len(spec.get("worker", [])) + len(spec.get("chief", [])))
    if strategy.num_replicas_in_sync != workers:
        raise CollectiveError(
            f"this job has {strategy.num_replicas_in_sync} replicas on {workers} workers: "
            "ralp trains one replica per worker; give each worker one GPU "
            "(CUDA_VISIBLE_DEVICES=<its GPU>) and run one worker per GPU")


def _backing(variable):
    """The TensorFlow variable behind a Keras 3 variable (a distributed one in the scope)."""
    return getattr(variable, "value", variable)


def _summed(buckets: list[list[int]], grads: list, den) -> tuple[list, object]:
    """The gradients and ``den`` summed over the workers: one all-reduce per bucket, in the
    buckets' (backward) order, ``den`` in the first. TensorFlow runs a worker's collectives one
    after the other in the order they are issued, so an all-reduce of ``den`` on its own
    (right after the forward pass) would hold every bucket until it was done: it rides in the
    first bucket instead, which starts with the backward pass's first gradients."""
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    summed, total = list(grads), None
    for k, bucket in enumerate(buckets):
        values = [grads[i] for i in bucket]
        if k == 0:
            values.append(tf.cast(den, values[0].dtype))
        with tf.name_scope(f"ralp_bucket_{k}"):
            parts = context.all_reduce("sum", values)
        if k == 0:
            *parts, total = parts
        for i, part in zip(bucket, parts, strict=True):
            summed[i] = part
    return summed, total


def _gradient_bytes(variable) -> int:
    """The bytes of ``variable``'s (dense) gradient."""
    import math

    return math.prod(variable.shape) * np.dtype(variable.dtype).itemsize


def _wire_dtype(variable) -> np.dtype:
    """The dtype a variable's values cross in: integers (the optimizer's step count) as
    float64, which the ring sums exactly up to 2**53."""
    dtype = np.dtype(getattr(variable, "dtype", "float32"))
    return np.dtype("float64") if np.issubdtype(dtype, np.integer) else dtype


def leave_together(rank: int, workers: int, key: str = "ralp/leave") -> None:
    """Return once every worker of this job has called it, after its last collective, so that
    none exits while another still reads from it: a ring's chunks are pulled from their
    senders, so a worker whose last collective has completed may be one that another is still
    reading. Each worker says it is done through the coordination service's store and waits
    for all the others; worker 0, which hosts the service, goes last."""
    import contextlib

    import tensorflow as tf

    from ralp._compat import coordination_key_values

    put, get = coordination_key_values()
    put(f"{key}/done/{rank}", "1")
    for k in range(workers):
        get(f"{key}/done/{k}")
    if rank:
        # worker 0 exits as soon as the last key is in, and may close the service before the
        # insert's reply comes back; every collective has completed by now either way
        with contextlib.suppress(tf.errors.UnavailableError):
            put(f"{key}/left/{rank}", "1")
    else:
        for k in range(1, workers):
            get(f"{key}/left/{k}")
