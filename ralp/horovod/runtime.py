"""Mode "horovod": data-parallel training with Horovod's ring allreduce (the baseline).

This runs in every Horovod rank (a process started by ``horovodrun`` or by
:mod:`ralp.horovod.launch`); every rank runs the same script, ``ralp.wrap(model,
mode="horovod")`` and ``fit``. Each rank holds a full replica and reads its share of every
global batch (:mod:`ralp.training.data`); each step computes the gradient of its rows' loss
sums and adds them and the ranks' ``den`` up over the ranks, divides, adds the gradient of the
model's own losses, and applies the same update everywhere: one Keras step on the global
batch, on every replica. The initial variables (and the optimizer's) are broadcast from rank
0 before the first step.

The sums start while the backward pass runs, as Horovod's own ``DistributedGradientTape``
starts them: one allreduce op per gradient (and one for ``den``, right after the forward
pass), each depending only on its own tensor, so the graph hands each gradient to Horovod as
soon as the backward pass produces it (the last layers' first). Horovod's background thread
fuses the tensors that are ready on every rank into one ring allreduce (tensor fusion,
``HOROVOD_FUSION_THRESHOLD``, ``HOROVOD_CYCLE_TIME``) while the earlier layers' gradients are
still being computed. A grouped allreduce would wait for its last input: the end of the
backward pass.

Keras 3 notes (docs/how-to/install.md): Horovod's ``DistributedGradientTape`` and its Keras optimizer
wrapper expect Keras 2 variables and fail on Keras 3 ones (``'Variable' object has no
attribute 'ref'``), so the step calls ``hvd.allreduce`` itself, per gradient as that tape
does, and broadcasts the backing ``tf.Variable``s (``v.value``).
"""

from __future__ import annotations

import numpy as np

from ralp.horovod.collectives import HorovodCollectives, broadcast_variables
from ralp.training.ranks import RankRuntime

# Horovod matches collectives across ranks by name: every rank names its step's sums alike.
DEN, GRADIENT = "ralp_den", "ralp_grad_{}"  # GRADIENT: of the k-th trainable variable


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
        summed = horovod_sum(tf, hvd)

        @tf.function
        def train_step(batch):
            x, y, weights, rows = unpack(batch)
            with tf.GradientTape() as tape:
                predictions = model(x, training=True)
                y, predictions, weights = own(rows, y, predictions, weights)
                num, den = objective.loss_sums(y, predictions, weights, share)
            total = summed(tf.reshape(den, [1]), DEN)  # starts before the backward pass
            grads = tape.gradient(num, variables)
            # one allreduce per gradient: each starts when the backward pass produces it
            grads = [summed(g, GRADIENT.format(k)) for k, g in enumerate(grads)]
            reg, reg_grads = regularization_gradients(model, variables)
            update = [plus(tf.math.divide_no_nan(g, tf.cast(total[0], g.dtype)), r)
                      for g, r in zip(grads, reg_grads, strict=True)]
            optimizer.apply_gradients(zip(update, variables, strict=True))
            states = objective.metric_states(y, predictions, weights)
            return objective.sums(num, den, tf.shape(predictions)[0], reg * share, states)

        self.step_function = train_step  # the traced step, for audits of its graph
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

    def restore_parts(self, load) -> None:
        """Rank 0 reads the checkpoint; every rank gets its values (a broadcast)."""
        from ralp.training.rank_checkpoints import assign_arrays

        if self.rank == 0:
            assign_arrays(self._checkpoint_variables(), load("model"), "model")
        self._broadcast_initial_state()


def horovod_sum(tf, hvd, process_set=None):
    """``sum(tensor, name)``: Horovod's allreduce (a sum over ``process_set``'s ranks, every
    rank by default) of one tensor under a fixed name, left alone by AutoGraph: Horovod's
    wrappers have no tensor-dependent control flow, and AutoGraph's conversion of them (per
    tensor, with its compression) was 2/3 of tracing googlenet's step."""
    allreduce = tf.autograph.experimental.do_not_convert(hvd.allreduce)
    where = {} if process_set is None else {"process_set": process_set}

    def total(tensor, name: str):
        return allreduce(tensor, op=hvd.Sum, name=name, ignore_name_scope=True, **where)

    return total
