"""Layer separation (Stanza, Wu et al. 2018) on Horovod: CONV ranks allreduce, FC ranks serve.

A job of N Horovod ranks has n_c CONV ranks (ranks 0 .. n_c-1) and n_f FC ranks (the last
n_f). The model is cut at the profiler's split point, the one RALP uses: the *head* (the
convolutions) runs on every CONV rank, the *tail* (the FC layers, the loss) on every FC rank.
The CONV ranks are split evenly into n_f groups of consecutive ranks, one FC rank per group.
One synchronous iteration:

- each CONV rank runs the head on its batch and sends its boundary activations and labels to
  its FC rank (``hvd.alltoall``: one call moves every group's rows at once; activations of
  several dtypes, or a model input an offloaded layer reads, in one call per kind:
  :mod:`ralp.horovod.stanza_boundary`);
- each FC rank stacks its group's rows into one batch, runs the tail's forward pass, the loss
  and the backward pass on it (one matmul per layer per iteration, not one per worker), and
  sends each CONV rank the gradient of its own rows back (``hvd.alltoall`` again);
- with n_f > 1 the FC ranks sum their tail gradients (allreduces on the FC ranks' process
  set) and every FC rank applies the same update to its full replica of the tail;
- the CONV ranks finish backprop through the head, sum the head gradients among themselves
  (allreduces on the CONV ranks' process set) and apply the same update.

Both rings start while their backward pass runs: one allreduce per gradient (as Horovod's
``DistributedGradientTape``), which Horovod fuses and sums while the earlier layers' gradients
are computed; the FC ranks' ``den`` is summed right after their forward pass.

Each FC rank computes its group's loss sums (:mod:`ralp.training.objective`): ``num`` over
its stacked rows and ``den``; the FC ranks add their ``den`` up, and each differentiates
``num / den_total``. The summed gradients are then exactly those of Keras' loss on the
concatenated global batch, so the maths is one Keras step on n_c x K samples, whatever the
groups' sizes; each part adds the gradient of its own layers' regularizers. Every CONV
rank's batch has the same size K (the FC ranks stack a fixed number of rows): a global batch
is split evenly over the CONV ranks and a last partial batch is left out of each pass.
Sample weights cross with the labels. Initial weights (and each part's optimizer state) are
broadcast from rank 0.

Everything that crosses goes through Horovod's own collectives; Horovod matches collectives
across ranks by name, so each has a fixed name here. Process sets are added after
``hvd.init(process_sets="dynamic")`` (the trainer initializes Horovod that way if nobody did).
Keras 3 notes as for :mod:`ralp.horovod.runtime`: explicit collectives, ``v.value`` for
broadcasts. Neither TensorFlow nor Horovod is imported at import time.
"""

from __future__ import annotations

import numpy as np

from ralp.horovod import stanza_checkpoints
from ralp.horovod.collectives import HorovodCollectives, broadcast_arrays, broadcast_variables
from ralp.horovod.runtime import horovod_sum, init_horovod
from ralp.horovod.stanza_boundary import Boundary, collective_name
from ralp.horovod.stanza_checkpoints import copy_process_sets
from ralp.horovod.stanza_layout import StanzaError, StanzaLayout
from ralp.modes import RALP
from ralp.placement.plan import StanzaPlan
from ralp.training.optimizer_state import OptimizerState
from ralp.training.ranks import RankRuntime

# Horovod matches collectives across ranks by name: every rank uses these.
ACTIVATIONS, LABELS = "ralp_stanza_activations", "ralp_stanza_labels"
WEIGHTS = "ralp_stanza_weights"
GRADIENTS = "ralp_stanza_gradients"
HEAD_GRADS, TAIL_GRADS = "ralp_stanza_head", "ralp_stanza_tail"  # + "_k": the k-th variable's
DEN = "ralp_stanza_den"
_PROCESS_SETS: dict = {}  # ranks -> this process's Horovod process set of them


class StanzaRuntime(HorovodCollectives, RankRuntime):
    """Trains ``model`` with layer separation over the Horovod ranks of this job.

    Every rank builds the same model and calls ``ralp.wrap(model, mode="stanza")`` with the
    same arguments (Horovod is initialized with dynamic process sets if nobody did).
    ``fc_workers`` is n_f (the last n_f ranks serve the tail); ``plan`` (a
    :class:`ralp.Plan`) overrides the profiler's split, which is chosen for one CONV rank's
    part of ``batch_size`` as RALP chooses it. FC ranks read no data: they learn the labels'
    shape and dtype from ``fit``'s data, which every rank is given.
    """

    mode = "stanza"
    fixed_batch = True

    def __init__(self, model, make_optimizer, *, fc_workers: int = 1, plan=None,
                 batch_size: int = 32, hvd=None, optimizer_state=None):
        super().__init__()
        self.split, self.plan = _split(model, plan, batch_size)  # fails before Horovod starts
        self.hvd = hvd = init_horovod(hvd)
        self.layout = StanzaLayout(hvd.size(), fc_workers)
        if self.layout.conv_workers > 1 and plan is None:  # for one CONV rank's part, as RALP
            self.split, self.plan = _split(model, plan,
                                           max(1, batch_size // self.layout.conv_workers))
        groups = [self.layout.group(g) for g in range(self.layout.fc_workers)]
        self.plan = StanzaPlan.of(self.plan, groups)  # its text names the CONV and FC ranks
        self.rank, self.size = hvd.rank(), hvd.size()
        self.model, self.optimizer = model, make_optimizer()
        self.profile = None
        self.conv_set = self._process_set(self.layout.conv_ranks)
        self.fc_set = self._process_set(self.layout.fc_ranks)
        self.copy_sets = copy_process_sets(self)  # each FC rank's tail copy to its peer
        self.copy_seconds: list[float] = []  # how long each tail copy took on this rank
        self.copy_wait_seconds: list[float] = []  # how long the next step then waited for it
        self.last_tail: dict | None = None  # an FC rank's tail at its last checkpoint
        self.tail_restored_from: str | None = None  # "peer" or "own file" after a restore
        self.is_fc = self.layout.is_fc(self.rank)
        self.part = self.split.tail if self.is_fc else self.split.head
        self.variables = self.part.trainable_variables
        index = {id(v): k for k, v in enumerate(model.trainable_variables)}
        self.indices = [index[id(v)] for v in self.variables]  # in the whole model's
        self.optimizer.build(self.variables)
        if optimizer_state is not None:  # the wrapped model's optimizer, mid-training
            optimizer_state.assign(self.optimizer, self.variables, self.indices)
        self._broadcast_initial_state()

    # ------------------------------------------------------------------ set-up

    def _process_set(self, ranks: tuple[int, ...]):
        """A Horovod process set of ``ranks`` (None for one rank: nothing to reduce there).
        Every rank adds every set, in the same order, as Horovod requires; a set is added
        once per process (a later trainer uses it again)."""
        if len(ranks) < 2:
            return None
        if tuple(ranks) in _PROCESS_SETS:
            return _PROCESS_SETS[tuple(ranks)]
        try:
            _PROCESS_SETS[tuple(ranks)] = self.hvd.add_process_set(list(ranks))
            return _PROCESS_SETS[tuple(ranks)]
        except ValueError as e:
            raise StanzaError(
                f"could not add the process set {list(ranks)} ({e}); initialize Horovod with "
                "hvd.init(process_sets='dynamic') before ralp.wrap, or let it initialize "
                "Horovod"
            ) from None

    def _broadcast_initial_state(self) -> None:
        """Every rank starts from rank 0's weights; each part's optimizer state comes from the
        first rank of that part, within the part's process set."""
        hvd = self.hvd
        broadcast_variables(hvd, self.model.variables, 0, "ralp_stanza_model")
        part_set = self.fc_set if self.is_fc else self.conv_set
        if part_set is not None:
            root = self.layout.fc_ranks[0] if self.is_fc else 0
            broadcast_variables(hvd, self.optimizer.variables, root,
                                f"ralp_stanza_optimizer_{'fc' if self.is_fc else 'conv'}",
                                part_set)

    # ------------------------------------------------------------------ the two roles

    data_workers = property(lambda self: self.layout.conv_workers)

    @property
    def data_index(self) -> int | None:
        """This CONV rank's shard; None on an FC rank, which reads no data."""
        return None if self.is_fc else self.rank

    def describe(self) -> str:
        return f"conv={self.layout.conv_workers} fc={self.layout.fc_workers}\n{self.plan}"

    def check_data(self, data) -> None:
        """Every CONV rank's batch has the same size: the global batch splits evenly."""
        n_c = self.layout.conv_workers
        batch = getattr(data, "global_batch", None)
        if data.worker_batch(self.sharding(data)) is None or (batch is not None and batch % n_c):
            raise StanzaError(
                f"stanza splits each global batch evenly over its {n_c} CONV ranks (the FC "
                f"ranks stack a fixed number of rows): the batch size ({batch}) must be a "
                f"multiple of {n_c}, and a dataset function's batches of a fixed size")

    def _data_key(self, data, sharding):
        spec = data.element_spec
        return len(spec), tuple(spec[1].shape[1:]), spec[1].dtype, data.worker_batch(sharding)

    def _build(self, objective, data) -> None:
        """The step of this rank's role, for ``objective`` and the data's labels."""
        spec = data.element_spec
        self.label_shape = tuple(spec[1].shape[1:])
        self.label_dtype = spec[1].dtype
        self.weighted = len(spec) > 2
        self.K = data.worker_batch(self.sharding(data))
        step = self._fc_step(objective) if self.is_fc else self._conv_step(objective)
        self._train = lambda batch: np.asarray(step(batch))

    def _conv_step(self, objective):
        import tensorflow as tf

        from ralp.training.objective import plus, regularization_gradients

        hvd, layout, head, K = self.hvd, self.layout, self.split.head, self.K
        share = 1.0 / layout.conv_workers
        boundary = Boundary.of(self.split)
        to_fc = [K if r == layout.fc_rank_of(self.rank) else 0 for r in range(layout.size)]
        nothing = [0] * layout.size

        # What this rank sends where it sends nothing: function arguments, not constants in
        # the graph (see _alltoall).
        empty_rows = [tf.zeros([0, g.width], g.dtype) for g in boundary.computed]
        alltoall = _unconverted(tf)
        summed = horovod_sum(tf, hvd, self.conv_set)

        width = objective.width

        @tf.function
        def step(batch, empty_rows):
            x, y = batch[0], batch[1]
            # the FC ranks count on K rows (of every input's features)
            x = tf.nest.map_structure(lambda t: tf.ensure_shape(t, [K, *t.shape[1:]]), x)
            with tf.GradientTape() as tape:
                outputs = head(x, training=True)
                outputs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
                packed = boundary.pack(outputs, K)
            labels = tf.reshape(tf.cast(y, self.label_dtype), [K, *self.label_shape])
            sends = [alltoall(hvd, rows, to_fc, collective_name(ACTIVATIONS, k), [0, g.width])
                     for k, (g, rows) in enumerate(zip(boundary.groups, packed, strict=True))]
            sends.append(alltoall(hvd, labels, to_fc, LABELS, [0, *self.label_shape]))
            if self.weighted:
                weights = tf.reshape(tf.cast(batch[2], tf.float32), [K])
                sends.append(alltoall(hvd, weights, to_fc, WEIGHTS, [0]))
            sends = [tf.cast(tf.reduce_sum(t), tf.float32) for t in sends]
            with tf.control_dependencies(sends):  # receive after sending
                empty = [tf.identity(e) for e in empty_rows]
            back = [alltoall(hvd, e, nothing, collective_name(GRADIENTS, k), [K, g.width])
                    for k, (g, e) in enumerate(zip(boundary.computed, empty, strict=True))]
            targets = [rows for g, rows in zip(boundary.groups, packed, strict=True)
                       if g.computed]
            grads = tape.gradient(targets, self.variables, output_gradients=back)
            if self.conv_set is not None:  # each gradient's sum starts as backprop makes it
                grads = [summed(g, f"{HEAD_GRADS}_{k}") for k, g in enumerate(grads)]
            reg, reg_grads = regularization_gradients(head, self.variables)
            grads = [plus(g, r) for g, r in zip(grads, reg_grads, strict=True)]
            self.optimizer.apply_gradients(zip(grads, self.variables, strict=True))
            # Horovod's ops are not stateful: one whose result feeds nothing the function
            # returns may be pruned. The sends' (empty) results feed the output.
            nothing_sent = tf.add_n(sends)
            zeros = tf.zeros([width - 4], tf.float32)
            return tf.concat([tf.stack([nothing_sent * 0.0, 0.0, 0.0,
                                        tf.cast(reg, tf.float32) * share]), zeros], axis=0)

        self.step_function = step  # the traced step, for audits of its graph
        return lambda batch: step(batch, empty_rows)

    def _fc_step(self, objective):
        import tensorflow as tf

        from ralp.training.objective import plus, regularization_gradients

        hvd, layout, tail, K = self.hvd, self.layout, self.split.tail, self.K
        boundary = Boundary.of(self.split)
        fc_index = self.rank - layout.conv_workers
        group = layout.group(fc_index)
        rows = K * len(group)  # the stacked batch
        back_to = [K if r in group else 0 for r in range(layout.size)]
        share = 1.0 / layout.fc_workers
        nothing = [0] * layout.size

        # arguments, not constants: see _alltoall
        empty_rows = [tf.zeros([0, g.width], g.dtype) for g in boundary.groups]
        empty_labels = tf.zeros([0, *self.label_shape], self.label_dtype)
        empty_weights = tf.zeros([0], tf.float32)
        alltoall = _unconverted(tf)
        summed = horovod_sum(tf, hvd, self.fc_set)
        n = len(self.variables)

        @tf.function
        def step(empty_rows, empty_labels, empty_weights):
            stacked = [alltoall(hvd, e, nothing, collective_name(ACTIVATIONS, k), [rows, g.width])
                       for k, (g, e) in enumerate(zip(boundary.groups, empty_rows, strict=True))]
            labels = alltoall(hvd, empty_labels, nothing, LABELS,
                              [rows, *self.label_shape])
            weights = (alltoall(hvd, empty_weights, nothing, WEIGHTS, [rows])
                       if self.weighted else None)
            watched = [m for g, m in zip(boundary.groups, stacked, strict=True) if g.computed]
            with tf.GradientTape() as tape:
                tape.watch(watched)
                inputs = boundary.unpack(stacked, rows)
                predictions = tail(inputs if len(inputs) > 1 else inputs[0], training=True)
                num, den = objective.loss_sums(labels, predictions, weights, share)
            total = den if self.fc_set is None else summed(den, DEN)
            grads = tape.gradient(num, [*self.variables, *watched])
            grads, grad_stacked = grads[:n], grads[n:]
            back = [alltoall(hvd, tf.math.divide_no_nan(g, tf.cast(total, g.dtype)), back_to,
                             collective_name(GRADIENTS, k), [0, group_.width])
                    for k, (group_, g) in enumerate(zip(boundary.computed, grad_stacked,
                                                        strict=True))]
            if self.fc_set is not None:  # each gradient's sum starts as backprop makes it
                grads = [summed(g, f"{TAIL_GRADS}_{k}") for k, g in enumerate(grads)]
            reg, reg_grads = regularization_gradients(tail, self.variables)
            grads = [plus(tf.math.divide_no_nan(g, tf.cast(total, g.dtype)), r)
                     for g, r in zip(grads, reg_grads, strict=True)]
            self.optimizer.apply_gradients(zip(grads, self.variables, strict=True))
            states = objective.metric_states(labels, predictions, weights)
            sums = objective.sums(num, den, rows, reg * share, states)
            # The sends' (empty) results feed the output, or the unstateful ops may be pruned.
            sent = tf.add_n([tf.cast(tf.reduce_sum(b), sums.dtype) for b in back]
                            or [tf.zeros([], sums.dtype)])
            return sums + sent * 0.0

        self.step_function = step  # the traced step, for audits of its graph
        return lambda batch: step(empty_rows, empty_labels, empty_weights)

    # ------------------------------------------------------------------ collectives

    # ------------------------------------------------------------------ the whole model

    def share_weights(self):
        """Make every rank's ``model`` the trained model: the head from CONV rank 0, the tail
        from the first FC rank (a collective: call it on every rank). Returns the model."""
        broadcast_variables(self.hvd, self.split.head.variables, 0, "ralp_stanza_head")
        broadcast_variables(self.hvd, self.split.tail.variables, self.layout.fc_ranks[0],
                            "ralp_stanza_tail")
        return self.model

    def weights(self) -> list[np.ndarray]:
        """The trained weights on every rank (a collective: each part from its ranks)."""
        return [np.asarray(w) for w in self.share_weights().get_weights()]

    def optimizer_state(self) -> OptimizerState:
        """Both parts' optimizer state on every rank (a collective): the head's from CONV rank
        0, the tail's from the first FC rank, keyed by the whole model's variables."""
        mine = _as_arrays(OptimizerState.read(self.optimizer, self.variables, self.indices))
        state = OptimizerState()
        for root in (0, self.layout.fc_ranks[0]):
            part = _from_arrays(broadcast_arrays(
                self.hvd, mine if self.rank == root else None, root,
                f"ralp_stanza_optimizer_{root}", self.hvd.global_process_set))
            state = OptimizerState(part.iterations, part.learning_rate,
                                   {**state.slots, **part.slots})
        return state

    def set_state(self, weights, optimizer) -> None:
        """Rank 0's ``weights`` and optimizer state (both parts') on every rank (a
        collective)."""
        if weights is not None:
            self.model.set_weights(weights)
        mine = _as_arrays(optimizer) if self.rank == 0 and optimizer is not None else None
        received = broadcast_arrays(self.hvd, mine, 0, "ralp_stanza_set_state",
                                    self.hvd.global_process_set)
        if received is not None:
            _from_arrays(received).assign(self.optimizer, self.variables, self.indices)
        broadcast_variables(self.hvd, self.model.variables, 0, "ralp_stanza_model")

    def sync_statistics(self) -> None:
        """Each part's moving statistics set to their mean over the ranks that train it (the
        CONV ranks the head's, the FC ranks the tail's; a collective in each part's set)."""
        from ralp.training.ranks import statistics_variables

        ranks = self.layout.fc_ranks if self.is_fc else self.layout.conv_ranks
        part_set = self.fc_set if self.is_fc else self.conv_set
        if part_set is None:
            return
        name = f"ralp_stanza_statistics_{'fc' if self.is_fc else 'conv'}"

        def total(flat):
            import tensorflow as tf

            return self.hvd.allreduce(tf.constant(flat), op=self.hvd.Sum, name=name,
                                      process_set=part_set).numpy()

        self._average(statistics_variables(self.part), total, len(ranks))

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

    def restore_parts(self, load) -> None:
        stanza_checkpoints.restore_checkpoint(self, load)


def _as_arrays(state: OptimizerState) -> dict:
    """An optimizer state as named arrays, to broadcast."""
    arrays = {f"{k}/{slot}": value for k, slots in state.slots.items()
              for slot, value in slots.items()}
    arrays["iterations"] = np.array(state.iterations)
    if state.learning_rate is not None:
        arrays["learning_rate"] = np.array(state.learning_rate)
    return arrays


def _from_arrays(arrays: dict) -> OptimizerState:
    arrays = dict(arrays)
    rate = arrays.pop("learning_rate", None)
    state = OptimizerState(int(arrays.pop("iterations")), None if rate is None else float(rate))
    for key, value in arrays.items():
        k, slot = key.split("/", 1)
        state.slots.setdefault(int(k), {})[slot] = value
    return state


def _split(model, plan, batch_size: int):
    """The head and tail of ``model`` at ``plan``'s boundary (default: the profiler's split,
    as RALP uses it); a model with nothing to offload is an error."""
    from ralp.placement.choose import NothingToOffloadError, check_placeable, choose_plan
    from ralp.placement.plan import PlanError
    from ralp.placement.rewriter import PlacedModel, split_model

    try:
        check_placeable(model)
        choice = choose_plan(model, RALP, workers=1, num_ps=1, plan=plan, batch_size=batch_size)
    except NothingToOffloadError as e:
        raise StanzaError(f"Stanza needs layers to put on the FC ranks, but model "
                          f"{model.name!r} has none: {e.reason}") from None
    except PlanError as e:
        raise StanzaError(str(e)) from None
    try:
        split = split_model(PlacedModel(model, choice.plan, {}))
    except PlanError as e:
        raise StanzaError(str(e)) from None
    return split, choice.plan


def _unconverted(tf):
    """``_alltoall``, left alone by AutoGraph: it has no tensor-dependent control flow, and
    converting Horovod's wrappers was 2/3 of tracing a step."""
    return tf.autograph.experimental.do_not_convert(_alltoall)


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
