"""Mode "horovod": data-parallel training with Horovod's ring allreduce (the baseline).

This runs in every Horovod rank (a process started by ``horovodrun`` or by
:mod:`ralp.horovod.launch`); every rank runs the same script, ``ralp.wrap(model,
mode="horovod")`` and ``fit``. Each rank holds a full replica and reads its share of every
global batch (:mod:`ralp.training.data`); each step computes the gradient of its rows' loss
sums, adds them and the ranks' ``den`` up in one grouped allreduce (Horovod fuses the
tensors; Gloo runs a ring allreduce over them), divides, adds the gradient of the model's own
losses, and applies the same update everywhere: one Keras step on the global batch, on
every replica. The initial variables (and the optimizer's) are broadcast from rank 0 before
the first step.

Keras 3 notes (docs/how-to/install.md): Horovod's ``DistributedGradientTape`` and its Keras optimizer
wrapper expect Keras 2 variables and fail on Keras 3 ones (``'Variable' object has no
attribute 'ref'``), so the step calls ``hvd.grouped_allreduce`` itself and broadcasts the
backing ``tf.Variable``s (``v.value``).
"""

from __future__ import annotations

import numpy as np

from ralp.horovod.collectives import HorovodCollectives, broadcast_variables
from ralp.training.ranks import RankRuntime


def init_horovod(hvd=None):
    """``horovod.tensorflow``, initialized (with dynamic process sets, which stanza adds)."""
    if hvd is None:
        import horovod.tensorflow as hvd
    if not hvd.is_initialized():
        hvd.init(process_sets="dynamic")
    return hvd


class HorovodRuntime(HorovodCollectives, RankRuntime):
    """Trains ``model`` data-parallel over the Horovod ranks of this job."""

    mode = "horovod"

    def __init__(self, model, make_optimizer, hvd=None, optimizer_state=None):
        super().__init__()
        self.hvd = hvd = init_horovod(hvd)
        self.model = model
        self.optimizer = make_optimizer()
        self.optimizer.build(model.trainable_variables)
        if optimizer_state is not None:  # the wrapped model's optimizer, mid-training
            optimizer_state.assign(self.optimizer, model.trainable_variables)
        self._broadcast_initial_state()

    rank = property(lambda self: self.hvd.rank())
    size = property(lambda self: self.hvd.size())
    data_index = property(lambda self: self.hvd.rank())
    data_workers = property(lambda self: self.hvd.size())

    def _broadcast_initial_state(self) -> None:
        """Every rank starts from rank 0's weights and optimizer state."""
        broadcast_variables(self.hvd, [*self.model.variables, *self.optimizer.variables], 0,
                            "ralp_horovod_state")

    def _build(self, objective, data) -> None:
        import tensorflow as tf

        from ralp.training.data import own, unpack
        from ralp.training.objective import plus, regularization_gradients

        hvd, model, optimizer = self.hvd, self.model, self.optimizer
        variables = model.trainable_variables
        share = 1.0 / hvd.size()
        # Horovod's wrappers have no tensor-dependent control flow; AutoGraph's conversion of
        # them (per gradient, with its compression) was 2/3 of tracing googlenet's step.
        grouped_allreduce = tf.autograph.experimental.do_not_convert(hvd.grouped_allreduce)

        @tf.function
        def train_step(batch):
            x, y, weights, rows = unpack(batch)
            with tf.GradientTape() as tape:
                predictions = model(x, training=True)
                y, predictions, weights = own(rows, y, predictions, weights)
                num, den = objective.loss_sums(y, predictions, weights, share)
            grads = tape.gradient(num, variables)
            reg, reg_grads = regularization_gradients(model, variables)
            # One grouped allreduce: the gradients' and den's sums over every rank.
            *summed, total = grouped_allreduce([*grads, tf.reshape(den, [1])], op=hvd.Sum,
                                               name="ralp_horovod_gradients",
                                               ignore_name_scope=True)
            update = [plus(tf.math.divide_no_nan(g, tf.cast(total[0], g.dtype)), r)
                      for g, r in zip(summed, reg_grads, strict=True)]
            optimizer.apply_gradients(zip(update, variables, strict=True))
            states = objective.metric_states(y, predictions, weights)
            return objective.sums(num, den, tf.shape(predictions)[0], reg * share, states)

        self._train = lambda batch: np.asarray(train_step(batch))

    # ------------------------------------------------------------------ state

    def set_state(self, weights, optimizer) -> None:
        """Rank 0's ``weights`` and optimizer state on every rank (a collective)."""
        if weights is not None:
            self.model.set_weights(weights)
        if optimizer is not None:
            optimizer.assign(self.optimizer, self.model.trainable_variables)
        self._broadcast_initial_state()

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
