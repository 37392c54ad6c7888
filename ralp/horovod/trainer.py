"""Data-parallel training of a Keras 3 model with Horovod's ring allreduce (the baseline).

This runs inside one Horovod rank (a process started by ``horovodrun`` or by
:mod:`ralp.horovod.launch`). Each rank holds a full replica; each step computes the
gradients of its own batch, averages them over all ranks with one grouped allreduce (Horovod
fuses the tensors and Gloo runs a ring allreduce over them), and applies the same update
everywhere, so the replicas stay identical. The initial variables (and the optimizer's) are
broadcast from rank 0 before the first step.

Keras 3 notes (docs/install.md): Horovod's ``DistributedGradientTape`` and its Keras optimizer
wrapper expect Keras 2 variables and fail on Keras 3 ones (``'Variable' object has no
attribute 'ref'``), so the step calls ``hvd.grouped_allreduce`` itself and broadcasts the
backing ``tf.Variable``s (``v.value``).

What the model trains with comes from :func:`ralp.training.compile.training_setup`, as for the
PS trainer: the arguments given, else the compiled model's optimizer, loss and metrics, else
the defaults (SGD with momentum; cross-entropy on the model's logits or softmax output).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ralp.training.lockstep_fit import StepHistory


class HorovodTrainer:
    """Trains ``model`` data-parallel over the Horovod ranks of this job.

    ``hvd`` is ``horovod.tensorflow`` after ``hvd.init()``; it is passed in so this module
    imports neither TensorFlow nor Horovod at import time.
    """

    def __init__(self, hvd, model, optimizer=None, loss_fn=None, metrics=None):
        import keras
        import tensorflow as tf

        from ralp.training.compile import BatchMetrics, optimizer_factory, training_setup

        setup = training_setup(model, optimizer, loss_fn, metrics, where="HorovodTrainer")
        self.hvd = hvd
        self.model = model
        if isinstance(setup.optimizer, keras.optimizers.Optimizer):
            optimizer = setup.optimizer  # given, or the compiled model's: used as it is
        else:
            optimizer = optimizer_factory(setup.optimizer)()  # a name, or the default
        self.optimizer = optimizer
        self.loss_fn = setup.loss
        self.metric_names = setup.metric_names
        batch_metrics = self.batch_metrics = BatchMetrics(setup.metrics)
        variables = model.trainable_variables
        optimizer.build(variables)
        self._broadcast_initial_state()
        # Horovod's wrappers have no tensor-dependent control flow; AutoGraph's conversion of
        # them (per gradient, with its compression) was 2/3 of tracing googlenet's step.
        grouped_allreduce = tf.autograph.experimental.do_not_convert(hvd.grouped_allreduce)

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = self.loss_fn(y, logits)
            grads = tape.gradient(loss, variables)
            # One grouped allreduce: Horovod negotiates and fuses all gradients together.
            grads = grouped_allreduce(grads, op=hvd.Average)
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            return loss, batch_metrics(y, logits)

        self._train_step = train_step

    def _broadcast_initial_state(self) -> None:
        """Every rank starts from rank 0's weights and optimizer state."""
        state = [v.value for v in self.model.variables]
        state += [v.value for v in self.optimizer.variables]
        self.hvd.broadcast_variables(state, root_rank=0)

    def run_steps(
        self,
        batches: Iterable,
        steps: int,
        on_step: Callable[[int, float], None] | None = None,
    ) -> StepHistory:
        """Run ``steps`` synchronous steps on this rank's ``batches`` ((x, y) pairs).

        ``on_step(step_index, loss)`` is called after each step (on every rank).
        """
        from ralp.training.lockstep_fit import run_train_steps

        return run_train_steps(self._train_step, self.metric_names, batches, steps, on_step)

    def barrier(self) -> None:
        """Wait until every rank gets here (an allreduce of one number)."""
        import tensorflow as tf

        self.hvd.allreduce(tf.constant(0.0), op=self.hvd.Sum, name="ralp_barrier")

    def weights(self) -> list:
        """This replica's weights, as numpy arrays in ``model.weights`` order."""
        return [w.numpy() for w in self.model.weights]

    @property
    def data_shard(self) -> tuple[int, int]:
        """(this rank's shard, shards): every rank reads data."""
        return self.hvd.rank(), self.hvd.size()

    def mean_loss(self, losses) -> float:
        """The mean step loss over every rank's steps (a collective)."""
        import tensorflow as tf

        mine = tf.constant(float(np.mean(losses)) if losses else 0.0, tf.float64)
        return float(self.hvd.allreduce(mine, op=self.hvd.Average, name="ralp_epoch_loss"))

    def evaluate(self, x, y) -> dict[str, float]:
        """Loss, accuracy and metrics of this replica (every replica is the same)."""
        from ralp.training.compile import evaluate_model

        return evaluate_model(self.model, self.loss_fn, self.batch_metrics, x, y)

    # ------------------------------------------------------------------ Keras' fit

    def fit(self, x=None, y=None, *, batches=None, batch_size: int = 32, epochs: int = 1,
            steps_per_epoch: int | None = None, validation_data=None,
            validation_split: float = 0.0, validation_freq=1, initial_epoch: int = 0,
            callbacks=(), shuffle: bool = True, seed: int = 0, checkpoint_dir=None,
            checkpoint_every: int | None = None):
        """Keras' ``fit`` on this rank (call it on every rank with the same arguments):
        arrays ``x``, ``y`` (each data rank trains on its shard) or ``batches``, validation,
        callbacks and a ``history`` of epoch logs (:mod:`ralp.training.lockstep_fit`). With
        ``checkpoint_dir``, rank 0 saves every ``checkpoint_every`` steps and at each epoch's
        end, and the fit goes on from the newest checkpoint there
        (:mod:`ralp.training.rank_checkpoints`)."""
        from ralp.training.lockstep_fit import fit_epochs

        return fit_epochs(self, x, y, batches=batches, batch_size=batch_size, epochs=epochs,
                          steps_per_epoch=steps_per_epoch, validation_data=validation_data,
                          validation_split=validation_split, validation_freq=validation_freq,
                          initial_epoch=initial_epoch, callbacks=callbacks, shuffle=shuffle,
                          seed=seed, checkpoint_dir=checkpoint_dir,
                          checkpoint_every=checkpoint_every)

    # ------------------------------------------------------------------ checkpoints

    @property
    def rank(self) -> int:
        return self.hvd.rank()

    def _checkpoint_variables(self) -> list:
        from ralp.training.rank_checkpoints import part_variables

        return part_variables("model", self.model.variables, self.optimizer)

    def checkpoint_fingerprint(self) -> dict:
        from ralp.training.rank_checkpoints import lockstep_fingerprint

        return lockstep_fingerprint(self.model, self.optimizer, "horovod")

    def checkpoint_parts(self) -> dict[str, dict]:
        """What this rank writes of a checkpoint: rank 0 its whole replica, the others
        nothing (every replica is the same)."""
        from ralp.training.rank_checkpoints import read_arrays

        return {"model": read_arrays(self._checkpoint_variables())} if self.rank == 0 else {}

    def restore_checkpoint(self, load) -> None:
        """Rank 0 reads the checkpoint; every rank gets its values (a broadcast)."""
        from ralp.training.rank_checkpoints import assign_arrays

        if self.rank == 0:
            assign_arrays(self._checkpoint_variables(), load("model"), "model")
        self._broadcast_initial_state()

    def share_text(self, text: str) -> str:
        """Rank 0's ``text`` on every rank (a collective)."""
        return self.hvd.broadcast_object(text, root_rank=0, name="ralp_checkpoint_state")

    def agree(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is True on any (a collective)."""
        import tensorflow as tf

        value = self.hvd.allreduce(tf.constant(float(flag)), op=self.hvd.Max, name="ralp_agree")
        return bool(float(value) > 0.5)

