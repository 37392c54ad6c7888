"""Layer separation (Stanza, Wu et al. 2018) on Horovod: CONV ranks allreduce, FC ranks serve.

A job of N Horovod ranks has n_c CONV ranks (ranks 0 .. n_c-1) and n_f FC ranks (the last
n_f). The model is cut at the profiler's split point, the one RALP uses: the *head* (the
convolutions) runs on every CONV rank, the *tail* (the FC layers, the loss) on every FC rank.
The CONV ranks are split evenly into n_f groups of consecutive ranks, one FC rank per group.
One synchronous iteration:

- each CONV rank runs the head on its batch and sends its boundary activations and labels to
  its FC rank (``hvd.alltoall``: one call moves every group's rows at once);
- each FC rank stacks its group's rows into one batch, runs the tail's forward pass, the loss
  and the backward pass on it (one matmul per layer per iteration, not one per worker), and
  sends each CONV rank the gradient of its own rows back (``hvd.alltoall`` again);
- with n_f > 1 the FC ranks sum their tail gradients (an allreduce on the FC ranks' process
  set) and every FC rank applies the same update to its full replica of the tail;
- the CONV ranks finish backprop through the head, sum the head gradients among themselves
  (an allreduce on the CONV ranks' process set) and apply the same update.

The loss an FC rank differentiates is its group's share of the global mean: its mean loss x
(group size / n_c). The summed gradients are then exactly those of the mean loss over the
concatenated global batch, so the maths is synchronous SGD on n_c x K samples, whatever the
groups' sizes. Initial weights (and each part's optimizer state) are broadcast from rank 0.

Everything that crosses goes through Horovod's own collectives; Horovod matches collectives
across ranks by name, so each has a fixed name here. Process sets are added after
``hvd.init(process_sets="dynamic")`` (the trainer initializes Horovod that way if nobody did).
Keras 3 notes as for :mod:`ralp.horovod.trainer`: explicit collectives, ``v.value`` for
broadcasts. Neither TensorFlow nor Horovod is imported at import time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ralp.defaults import DEFAULT_BATCH_SIZE
from ralp.horovod import stanza_checkpoints
from ralp.horovod.stanza_checkpoints import copy_process_sets
from ralp.horovod.stanza_layout import StanzaError, StanzaLayout

# Horovod matches collectives across ranks by name: every rank uses these.
ACTIVATIONS, LABELS = "ralp_stanza_activations", "ralp_stanza_labels"
GRADIENTS, HEAD_GRADS, TAIL_GRADS = "ralp_stanza_gradients", "ralp_stanza_head", "ralp_stanza_tail"


@dataclass
class StanzaHistory:
    """What :meth:`StanzaTrainer.fit` did on this rank: per step, the wall-clock end time
    (``time.perf_counter``); on FC ranks also the mean loss of the group's stacked batch.
    ``final_loss`` is the last step's mean loss over the global batch, on every rank."""

    step_end_times: list[float] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)
    final_loss: float | None = None


class StanzaTrainer:
    """Trains ``model`` with layer separation over the Horovod ranks of this job.

    ``hvd`` is ``horovod.tensorflow``; initialize it with ``hvd.init(process_sets="dynamic")``
    (or not at all: the trainer then does). Every rank builds the same model and creates the
    trainer with the same arguments. ``fc_workers`` is n_f (the last n_f ranks serve the
    tail); ``plan`` (a :class:`ralp.Plan`) overrides the profiler's split, which is chosen for
    ``batch_size`` as RALP chooses it. ``loss_fn`` must average over the batch (Keras'
    default reduction). Labels cross as ``label_dtype`` with per-sample shape ``label_shape``
    (sparse integer class labels by default): FC ranks see no data and need to know.
    """

    def __init__(self, hvd, model, optimizer, loss_fn=None, *, fc_workers: int = 1,
                 plan=None, batch_size: int = DEFAULT_BATCH_SIZE,
                 label_shape: tuple[int, ...] = (), label_dtype: str = "int32"):
        import keras

        self.split, self.plan = _split(model, plan, batch_size)  # bad models fail before Horovod
        if not hvd.is_initialized():
            hvd.init(process_sets="dynamic")
        self.hvd = hvd
        self.layout = StanzaLayout(hvd.size(), fc_workers)
        self.rank = hvd.rank()
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn or keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.label_shape, self.label_dtype = tuple(label_shape), label_dtype
        self.batch_size = batch_size
        self.conv_set = self._process_set(self.layout.conv_ranks)
        self.fc_set = self._process_set(self.layout.fc_ranks)
        self.copy_sets = copy_process_sets(self)  # each FC rank's tail copy to its peer
        self.copy_seconds: list[float] = []  # how long each tail copy took on this rank
        self.copy_wait_seconds: list[float] = []  # how long the next step then waited for it
        self.last_tail: dict | None = None  # an FC rank's tail at its last checkpoint
        self.tail_restored_from: str | None = None  # "peer" or "own file" after a restore
        self.is_fc = self.layout.is_fc(self.rank)
        part = self.split.tail if self.is_fc else self.split.head
        self.variables = part.trainable_variables
        optimizer.build(self.variables)
        self._broadcast_initial_state()
        self._step = self._fc_step() if self.is_fc else self._conv_step()

    # ------------------------------------------------------------------ set-up

    def _process_set(self, ranks: tuple[int, ...]):
        """A Horovod process set of ``ranks`` (None for one rank: nothing to reduce there).
        Every rank adds every set, in the same order, as Horovod requires."""
        if len(ranks) < 2:
            return None
        try:
            return self.hvd.add_process_set(list(ranks))
        except ValueError as e:
            raise StanzaError(
                f"could not add the process set {list(ranks)} ({e}); initialize Horovod with "
                "hvd.init(process_sets='dynamic') before StanzaTrainer, or let it initialize "
                "Horovod"
            ) from None

    def _broadcast_initial_state(self) -> None:
        """Every rank starts from rank 0's weights; each part's optimizer state comes from the
        first rank of that part, within the part's process set."""
        hvd = self.hvd
        hvd.broadcast_variables([v.value for v in self.model.variables], root_rank=0)
        part_set = self.fc_set if self.is_fc else self.conv_set
        if part_set is not None:
            root = self.layout.fc_ranks[0] if self.is_fc else 0
            state = [v.value for v in self.optimizer.variables]
            hvd.broadcast_variables(state, root_rank=root, process_set=part_set)

    def _boundary(self):
        """(per-sample shapes, flat widths, dtype) of the tensors crossing at the split."""
        import math

        outputs = self.split.head.outputs
        shapes = [tuple(t.shape[1:]) for t in outputs]
        return shapes, [math.prod(s) for s in shapes], outputs[0].dtype

    # ------------------------------------------------------------------ the two roles

    def _conv_step(self):
        import tensorflow as tf

        hvd, layout, head, K = self.hvd, self.layout, self.split.head, self.batch_size
        _, widths, dtype = self._boundary()
        D = sum(widths)
        to_fc = [K if r == layout.fc_rank_of(self.rank) else 0 for r in range(layout.size)]
        nothing = [0] * layout.size

        # What this rank sends where it sends nothing: a function argument, not a constant in
        # the graph (see _alltoall).
        empty_rows = tf.zeros([0, D], dtype)
        alltoall, grouped_allreduce = _unconverted(tf, hvd)

        @tf.function
        def step(x, y, empty_rows):
            x = tf.ensure_shape(x, [K, *x.shape[1:]])  # the FC ranks count on K rows
            with tf.GradientTape() as tape:
                outputs = head(x, training=True)
                outputs = outputs if isinstance(outputs, list | tuple) else [outputs]
                flat = tf.concat([tf.reshape(t, [K, w]) for t, w in
                                  zip(outputs, widths, strict=True)], axis=1)
            labels = tf.reshape(tf.cast(y, self.label_dtype), [K, *self.label_shape])
            sent = alltoall(hvd, flat, to_fc, ACTIVATIONS, [0, D])
            sent_labels = alltoall(hvd, labels, to_fc, LABELS, [0, *self.label_shape])
            with tf.control_dependencies([sent, sent_labels]):  # receive after sending
                empty = tf.identity(empty_rows)
            grad = alltoall(hvd, empty, nothing, GRADIENTS, [K, D])
            grads = tape.gradient(flat, self.variables, output_gradients=grad)
            if self.conv_set is not None:
                grads = grouped_allreduce(grads, op=hvd.Sum, process_set=self.conv_set,
                                          name=HEAD_GRADS, ignore_name_scope=True)
            self.optimizer.apply_gradients(zip(grads, self.variables, strict=True))
            # Horovod's ops are not stateful: one whose result feeds nothing the function
            # returns may be pruned. The sends' (empty) results feed the output.
            return tf.reduce_sum(sent) + tf.cast(tf.reduce_sum(sent_labels), sent.dtype)

        return lambda x, y: step(x, y, empty_rows)

    def _fc_step(self):
        import tensorflow as tf

        hvd, layout, tail = self.hvd, self.layout, self.split.tail
        shapes, widths, dtype = self._boundary()
        D, fc_index = sum(widths), self.rank - layout.conv_workers
        rows = self.batch_size * len(layout.group(fc_index))  # the stacked batch
        group = layout.group(fc_index)
        back_to = [self.batch_size if r in group else 0 for r in range(layout.size)]
        share = layout.share(fc_index)  # of the global batch
        nothing = [0] * layout.size

        empty_rows = tf.zeros([0, D], dtype)  # arguments, not constants: see _alltoall
        empty_labels = tf.zeros([0, *self.label_shape], self.label_dtype)
        alltoall, grouped_allreduce = _unconverted(tf, hvd)

        @tf.function
        def step(empty_rows, empty_labels):
            stacked = alltoall(hvd, empty_rows, nothing, ACTIVATIONS, [rows, D])
            labels = alltoall(hvd, empty_labels, nothing, LABELS,
                              [rows, *self.label_shape])
            with tf.GradientTape() as tape:
                tape.watch(stacked)
                parts = tf.split(stacked, widths, axis=1) if len(widths) > 1 else [stacked]
                inputs = [tf.reshape(p, [rows, *s]) for p, s in zip(parts, shapes, strict=True)]
                logits = tail(inputs if len(inputs) > 1 else inputs[0], training=True)
                loss = self.loss_fn(labels, logits)
                scaled = loss * share
            *grads, grad_stacked = tape.gradient(scaled, [*self.variables, stacked])
            back = alltoall(hvd, grad_stacked, back_to, GRADIENTS, [0, D])
            if self.fc_set is not None:
                grads = grouped_allreduce(grads, op=hvd.Sum, process_set=self.fc_set,
                                          name=TAIL_GRADS, ignore_name_scope=True)
            self.optimizer.apply_gradients(zip(grads, self.variables, strict=True))
            # The send's (empty) result feeds the output, or the unstateful op may be pruned.
            return loss + tf.cast(tf.reduce_sum(back), loss.dtype)

        return lambda: step(empty_rows, empty_labels)

    # ------------------------------------------------------------------ training

    def run_steps(
        self,
        batches: Iterable | None,
        steps: int,
        on_step: Callable[[int, float | None], None] | None = None,
    ) -> StanzaHistory:
        """Run ``steps`` synchronous iterations; call it on every rank with the same ``steps``.

        A CONV rank trains on its ``batches`` ((x, y) pairs, the same batch size on every
        CONV rank); an FC rank reads no data (pass None). ``on_step(step, loss)`` is called
        after each step; ``loss`` is the group's mean loss on FC ranks, None on CONV ranks.
        """
        history = StanzaHistory()
        iterator = None if self.is_fc else iter(batches)
        loss = None
        for k in range(steps):
            if self.is_fc:
                loss = float(self._step())  # float(): waits for the step to finish
                history.step_losses.append(loss)
            else:
                x, y = next(iterator)
                self._step(x, y).numpy()
            history.step_end_times.append(time.perf_counter())
            if on_step is not None:
                on_step(k, loss)
        if steps:
            history.final_loss = self._global_loss(loss)
        return history

    def _global_loss(self, group_loss: float | None) -> float:
        """The last step's mean loss over the global batch: the sum of the groups' shares
        (a collective; CONV ranks add nothing)."""
        import tensorflow as tf

        share = self.layout.share(self.rank - self.layout.conv_workers) if self.is_fc else 0.0
        value = tf.constant((group_loss or 0.0) * share, tf.float64)
        return float(self.hvd.allreduce(value, op=self.hvd.Sum, name="ralp_stanza_loss"))

    def barrier(self) -> None:
        """Wait until every rank gets here (an allreduce of one number)."""
        import tensorflow as tf

        self.hvd.allreduce(tf.constant(0.0), op=self.hvd.Sum, name="ralp_barrier")

    def share_weights(self):
        """Make every rank's ``model`` the trained model: the head from CONV rank 0, the tail
        from the first FC rank (a collective: call it on every rank). Returns the model."""
        head = [v.value for v in self.split.head.variables]
        tail = [v.value for v in self.split.tail.variables]
        self.hvd.broadcast_variables(head, root_rank=0)
        self.hvd.broadcast_variables(tail, root_rank=self.layout.fc_ranks[0])
        return self.model

    def weights(self) -> list:
        """This rank's weights, as numpy arrays in ``model.weights`` order (the other part is
        stale until :meth:`share_weights`)."""
        return [w.numpy() for w in self.model.weights]

    @property
    def data_shard(self) -> tuple[int, int] | None:
        """(this CONV rank's shard, CONV ranks); None on an FC rank, which reads no data."""
        return None if self.is_fc else (self.rank, self.layout.conv_workers)

    @property
    def data_ranks(self) -> int:
        return self.layout.conv_workers

    def mean_loss(self, losses) -> float:
        """The mean step loss over the global batch (a collective: each FC rank adds its
        group's mean, weighted by the group's share)."""
        import tensorflow as tf

        mine = [v for v in losses if v is not None]
        share = self.layout.share(self.rank - self.layout.conv_workers) if self.is_fc else 0.0
        value = tf.constant(float(sum(mine) / len(mine)) * share if mine else 0.0, tf.float64)
        return float(self.hvd.allreduce(value, op=self.hvd.Sum, name="ralp_epoch_loss"))

    def evaluate(self, x, y) -> dict[str, float]:
        """Loss and accuracy of the trained model on every rank (it shares the weights
        first: a collective)."""
        from ralp.training.compile import BatchMetrics, evaluate_model

        return evaluate_model(self.share_weights(), self.loss_fn, BatchMetrics(()), x, y)

    # ------------------------------------------------------------------ Keras' fit

    def fit(self, x=None, y=None, *, batches=None, batch_size: int = 32, epochs: int = 1,
            steps_per_epoch: int | None = None, validation_data=None,
            validation_split: float = 0.0, validation_freq=1, initial_epoch: int = 0,
            callbacks=(), shuffle: bool = True, seed: int = 0, checkpoint_dir=None,
            checkpoint_every: int | None = None):
        """Keras' ``fit`` on this rank (call it on every rank with the same arguments):
        arrays ``x``, ``y`` (each data rank trains on its shard) or ``batches``, validation,
        callbacks and a ``history`` of epoch logs (:mod:`ralp.training.lockstep_fit`). With
        ``checkpoint_dir``, checkpoints every ``checkpoint_every`` steps and at each epoch's
        end (:mod:`ralp.horovod.stanza_checkpoints`), and the fit goes on from the newest."""
        from ralp.training.lockstep_fit import fit_epochs

        return fit_epochs(self, x, y, batches=batches, batch_size=batch_size, epochs=epochs,
                          steps_per_epoch=steps_per_epoch, validation_data=validation_data,
                          validation_split=validation_split, validation_freq=validation_freq,
                          initial_epoch=initial_epoch, callbacks=callbacks, shuffle=shuffle,
                          seed=seed, checkpoint_dir=checkpoint_dir,
                          checkpoint_every=checkpoint_every)

    # ---------------------------- checkpoints (ralp.horovod.stanza_checkpoints: FC copies)

    def checkpoint_fingerprint(self) -> dict:
        from ralp.training.rank_checkpoints import lockstep_fingerprint

        layout = self.layout
        return lockstep_fingerprint(self.model, self.optimizer,
                                    f"stanza:{layout.conv_workers}+{layout.fc_workers}")

    def checkpoint_parts(self) -> dict[str, dict]:
        return stanza_checkpoints.checkpoint_parts(self)

    def start_copies(self, write):  # the FC copies cross while the next step computes
        return stanza_checkpoints.start_copies(self, write)

    def restore_checkpoint(self, load) -> None:
        stanza_checkpoints.restore_checkpoint(self, load)

    def share_text(self, text: str) -> str:
        """Rank 0's ``text`` on every rank (a collective)."""
        return self.hvd.broadcast_object(text, root_rank=0, name="ralp_checkpoint_state")

    def agree(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is True on any (a collective)."""
        import tensorflow as tf

        value = self.hvd.allreduce(tf.constant(float(flag)), op=self.hvd.Max, name="ralp_agree")
        return bool(float(value) > 0.5)


def _split(model, plan, batch_size: int):
    """The head and tail of ``model`` at ``plan``'s boundary (default: the profiler's split,
    as RALP uses it); a model with nothing to offload is an error."""
    from ralp.placement.choose import check_placeable, choose_plan
    from ralp.placement.plan import PlanError
    from ralp.placement.rewriter import PlacedModel, split_model

    try:
        check_placeable(model)
        choice = choose_plan(model, "ralp", workers=1, num_ps=1, plan=plan, batch_size=batch_size)
    except PlanError as e:
        raise StanzaError(str(e)) from None
    if choice.plan.is_empty:
        raise StanzaError(f"Stanza needs layers to put on the FC ranks, but model "
                          f"{model.name!r} has none: {choice.profile.verdict}")
    try:
        split = split_model(PlacedModel(model, choice.plan, {}))
    except PlanError as e:
        raise StanzaError(str(e)) from None
    return split, choice.plan


def _unconverted(tf, hvd) -> tuple:
    """``_alltoall`` and Horovod's grouped allreduce, left alone by AutoGraph: they have no
    tensor-dependent control flow, and converting Horovod's wrappers was 2/3 of tracing a
    step."""
    skip = tf.autograph.experimental.do_not_convert
    return skip(_alltoall), skip(hvd.grouped_allreduce)


def _alltoall(hvd, tensor, splits: list[int], name: str, received_shape: list[int]):
    """``hvd.alltoall`` of ``tensor``'s rows (``splits[r]`` of them to rank r), named so that
    every rank's call matches, with the received tensor's shape made static.

    The static shape matters: Horovod's alltoall output has an unknown first dimension, and a
    shape computed from it (Keras' Flatten takes tf.shape(x)[0]) makes TF's shape inference
    *run* the alltoall while tracing, to fold that shape into a constant: the trace then hangs
    in the collective. ``tf.ensure_shape`` gives the shape (and checks it when the step runs).

    The sent tensor must not be a graph constant either (pass it in as a function argument):
    Horovod's ops are not marked stateful, so Grappler's constant folding would *execute* an
    alltoall whose inputs are all constants while it optimizes the graph, outside the step.
    """
    import tensorflow as tf

    received, _ = hvd.alltoall(tensor, splits=tf.constant(splits, tf.int32), name=name,
                               ignore_name_scope=True)
    return tf.ensure_shape(received, received_shape)
