"""Data-parallel training of a Keras 3 model with TensorFlow's own collectives
(``tf.distribute.MultiWorkerMirroredStrategy``): allreduce without a compiled Horovod.

Every worker process runs the same program with its ``TF_CONFIG``. The strategy starts the
worker's gRPC server in this process and must come before any other TensorFlow work (it
configures the collective ops at the context's start), so the trainer takes a function that
builds the model and calls it inside the strategy's scope: variables are then mirrored, and the
strategy broadcasts every initial value from worker 0, so all replicas start the same.

Each step runs one replica step per worker (``strategy.run``): the worker's own batch forward
and backward, and the optimizer's ``apply_gradients``, which all-reduces the gradients (a sum:
Keras 3's TensorFlow optimizer does it in the replica context, over the strategy's ring on CPU,
NCCL on GPUs) and applies the same update everywhere. The loss each replica differentiates is
its share of the global batch's mean, so the sum is the global batch's gradient.

Keras 3 notes: Keras' own ``fit`` fails under this strategy (keras-team/keras issue 20585), so
``fit`` here is ralp's lockstep loop (:mod:`ralp.training.lockstep_fit`); the optimizer is built
eagerly in the scope before the first traced step, as Keras' ``fit`` does (a stateful optimizer
first built inside a distributed ``tf.function`` fails in Keras 3.15: keras-team/keras issue
23085).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ralp.training.lockstep_fit import StepHistory

from ralp.errors import InvalidArgumentError, InvalidTypeError, RalpError

IMPLEMENTATIONS = ("auto", "ring", "nccl")


class CollectiveError(RalpError, RuntimeError):
    """The collective job could not start or a collective failed; the message says why.
    ``worker``: the worker whose failure ended the job, where known."""

    worker: int | None = None


def make_strategy(implementation: str = "auto", timeout_s: float | None = None):
    """``MultiWorkerMirroredStrategy`` from this process's ``TF_CONFIG``; call it before any
    other TensorFlow work. Blocks until every worker has joined."""
    if implementation not in IMPLEMENTATIONS:
        raise InvalidArgumentError(f"implementation must be one of {', '.join(IMPLEMENTATIONS)}, "
                                   f"got {implementation!r}")
    import tensorflow as tf

    comm = tf.distribute.experimental.CommunicationImplementation[implementation.upper()]
    options = tf.distribute.experimental.CommunicationOptions(implementation=comm,
                                                              timeout_seconds=timeout_s)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except RuntimeError as e:
        if "program startup" in str(e):
            raise CollectiveError("CollectiveTrainer must be made before any other TensorFlow "
                                  "work in this process (TensorFlow configures its collectives "
                                  "when it starts): build the model in build_model, which the "
                                  "trainer calls inside the strategy's scope") from None
        raise


class CollectiveTrainer:
    """Trains the model ``build_model()`` makes, data-parallel over this job's workers.

    Args:
        build_model: called once, inside the strategy's scope, to make the Keras 3 model (a
            compiled model brings its optimizer, loss and metrics).
        optimizer, loss, metrics: as for the other trainers (:func:`ralp.training.compile.
            training_setup`): the arguments, else the compiled model's, else the defaults.
        implementation: the collectives' implementation, "auto" (ring on CPUs, NCCL on GPUs),
            "ring" or "nccl".
        timeout_s: a collective that takes longer fails (``None``: TensorFlow's default, no
            limit; a lost worker is still reported by the coordination service's heartbeat).
        strategy: an existing ``MultiWorkerMirroredStrategy`` (one per process) instead of one
            made from ``TF_CONFIG``.

    Raises:
        CollectiveError: TensorFlow was already started in this process.
        InvalidTypeError: ``build_model`` did not return a Keras model.
    """

    def __init__(self, build_model: Callable, optimizer=None, loss=None, metrics=None, *,
                 implementation: str = "auto", timeout_s: float | None = None, strategy=None):
        if not callable(build_model):
            raise InvalidTypeError("CollectiveTrainer takes a function that builds the model "
                                   f"(it is called inside the strategy's scope), got "
                                   f"{type(build_model).__name__}")
        self.strategy = strategy or make_strategy(implementation, timeout_s)
        import keras

        from ralp.training.compile import BatchMetrics, optimizer_factory, training_setup

        with self.strategy.scope():
            model = build_model()
            if not isinstance(model, keras.Model):
                raise InvalidTypeError(f"build_model returned {type(model).__name__}, not a "
                                       "keras.Model")
            setup = training_setup(model, optimizer, loss, metrics, where="CollectiveTrainer")
            if isinstance(setup.optimizer, keras.optimizers.Optimizer) and \
                    setup.optimizer is getattr(model, "optimizer", None):
                self.optimizer = setup.optimizer  # compiled in the scope: mirrored already
            else:
                self.optimizer = optimizer_factory(setup.optimizer)()
            self.optimizer.build(model.trainable_variables)
            self.batch_metrics = BatchMetrics(setup.metrics)
        self.model, self.loss_fn, self.metric_names = model, setup.loss, setup.metric_names
        self._train_step = self._make_train_step()
        self._reducers: dict[str, Callable] = {}
        self._leaves = 0

    @property
    def workers(self) -> int:
        return int(self.strategy.num_replicas_in_sync)

    @property
    def rank(self) -> int:
        resolver = self.strategy.cluster_resolver
        return int(resolver.task_id or 0) if resolver is not None else 0

    def _make_train_step(self):
        import tensorflow as tf

        strategy, model, optimizer = self.strategy, self.model, self.optimizer
        variables, loss_fn, metrics = model.trainable_variables, self.loss_fn, self.batch_metrics

        def replica_step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = _mean_loss(loss_fn, y, logits)
                if model.losses:
                    loss += tf.add_n(model.losses)
                share = loss / tf.cast(strategy.num_replicas_in_sync, loss.dtype)
            grads = tape.gradient(share, variables)
            optimizer.apply_gradients(zip(grads, variables, strict=True))  # sums over replicas
            return loss, metrics(y, logits)

        @tf.function
        def train_step(x, y):
            loss, values = strategy.run(replica_step, args=(x, y))
            local = strategy.experimental_local_results
            return local(loss)[0], [local(v)[0] for v in values]

        return train_step

    def run_steps(self, batches: Iterable, steps: int,
                  on_step: Callable[[int, float], None] | None = None) -> StepHistory:
        """Run ``steps`` synchronous steps on this worker's ``batches`` ((x, y) pairs, each
        worker its own, all of the same size); ``on_step(step_index, loss)`` after each."""
        from ralp.training.lockstep_fit import run_train_steps

        return run_train_steps(self._train_step, self.metric_names, batches, steps, on_step)

    def _all_reduce(self, value: float, op: str) -> float:
        """``value`` of every worker combined with ``op`` ("sum" or "mean": the strategy's
        reductions)."""
        import tensorflow as tf

        if op not in self._reducers:
            reduce_op = {"sum": tf.distribute.ReduceOp.SUM, "mean": tf.distribute.ReduceOp.MEAN}[op]

            @tf.function
            def reduce(v):
                mine = self.strategy.run(tf.identity, args=(v,))  # on this worker's replica
                return self.strategy.reduce(reduce_op, mine, axis=None)

            self._reducers[op] = reduce
        return float(self._reducers[op](tf.constant(value, tf.float32)))

    def leave_together(self) -> None:
        """Return once every worker is done with its collectives (:func:`leave_together`)."""
        self.barrier()
        self._leaves += 1
        leave_together(self.rank, self.workers, f"ralp/leave{self._leaves}")

    def barrier(self) -> None:
        """Wait until every worker gets here."""
        self._all_reduce(0.0, "sum")

    def mean_loss(self, losses) -> float:
        """The mean step loss over every worker's steps (a collective)."""
        return self._all_reduce(float(np.mean(losses)) if len(losses) else 0.0, "mean")

    def agree(self, flag: bool) -> bool:
        """True on every worker when ``flag`` is True on any (a collective)."""
        return self._all_reduce(float(flag), "sum") > 0.5

    # ------------------------------------------------------------------ checkpoints

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

    def restore_checkpoint(self, load) -> None:
        """Worker 0 reads the checkpoint; every worker gets its values: a sum over the workers
        of worker 0's values and the others' zeros (exact: x + 0 = x)."""
        import tensorflow as tf

        from ralp.training.rank_checkpoints import assign_arrays

        named = self._checkpoint_variables()
        arrays = load("model") if self.rank == 0 else {
            key: np.zeros(v.shape, _wire_dtype(v)) for key, v in named}
        if self.rank == 0:
            assign_arrays(named, arrays, "model")  # checks every key and shape first
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
        self._shares = getattr(self, "_shares", 0) + 1
        key = f"ralp/checkpoint_state/{self._shares}"
        if self.rank == 0:
            put(key, text)
            return text
        return get(key)

    def weights(self) -> list:
        """This replica's weights, as numpy arrays in ``model.weights`` order."""
        return [np.asarray(w.numpy()) for w in self.model.weights]

    @property
    def data_shard(self) -> tuple[int, int]:
        """(this worker's shard, shards): every worker reads data."""
        return self.rank, self.workers

    def evaluate(self, x, y, batch_size: int = 256) -> dict[str, float]:
        """Loss, accuracy and metrics of this replica on ``x``, ``y`` (every replica is the
        same); a plain forward pass in this process, no collective."""
        y = np.asarray(y)
        x = np.asarray(x)
        logits = np.concatenate([np.asarray(self.model(x[i:i + batch_size], training=False))
                                 for i in range(0, len(x), batch_size)])
        out = {"loss": float(_mean_loss(self.loss_fn, y, logits)),
               "accuracy": float(np.mean(np.argmax(logits, -1) == y.reshape(-1)))}
        for metric, value in zip(self.batch_metrics.metrics, self.batch_metrics(y, logits),
                                 strict=True):
            out[metric.name] = float(value)
        return out

    def fit(self, x=None, y=None, *, batches=None, batch_size: int = 32, epochs: int = 1,
            steps_per_epoch: int | None = None, validation_data=None,
            validation_split: float = 0.0, validation_freq=1, initial_epoch: int = 0,
            callbacks=(), shuffle: bool = True, seed: int = 0, checkpoint_dir=None,
            checkpoint_every: int | None = None):
        """Keras' ``fit`` on this worker (call it on every worker with the same arguments):
        arrays ``x``, ``y`` (worker r of n trains on rows r, r + n, ...; ``batch_size`` is
        per worker) or ``batches``, validation, callbacks, and a history of epoch logs
        (:mod:`ralp.training.lockstep_fit`). With ``checkpoint_dir``, worker 0 saves every
        ``checkpoint_every`` steps and at each epoch's end, and the fit goes on from the
        newest checkpoint there (:mod:`ralp.training.rank_checkpoints`)."""
        from ralp.training.lockstep_fit import fit_epochs

        return fit_epochs(self, x, y, batches=batches, batch_size=batch_size, epochs=epochs,
                          steps_per_epoch=steps_per_epoch, validation_data=validation_data,
                          validation_split=validation_split, validation_freq=validation_freq,
                          initial_epoch=initial_epoch, callbacks=callbacks, shuffle=shuffle,
                          seed=seed, checkpoint_dir=checkpoint_dir,
                          checkpoint_every=checkpoint_every)


def _backing(variable):
    """The TensorFlow variable behind a Keras 3 variable (a distributed one in the scope)."""
    return getattr(variable, "value", variable)


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


def _mean_loss(loss_fn, y, logits):
    """The batch's mean loss, as one process would compute it. A Keras loss with a mean
    reduction divides by the replicas itself in a replica context (so that the replicas' sum
    is the mean): its unreduced values are averaged here instead, so the trainer scales once."""
    import keras

    if isinstance(loss_fn, keras.losses.Loss) and loss_fn.reduction in (
            "sum_over_batch_size", "mean"):
        return keras.ops.mean(loss_fn.call(y, logits))
    return loss_fn(y, logits)
