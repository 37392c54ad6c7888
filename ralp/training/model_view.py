"""The plain Keras model that callbacks, ``evaluate`` and ``predict`` see, kept in step with
the runtime's training state, both ways.

A mode trains its own copy of the model (placed on a parameter-server cluster, or one
replica per rank, or split into Stanza's parts). Keras' callbacks expect the model ``fit``
trains: they read and set its learning rate (``LearningRateScheduler``,
``ReduceLROnPlateau``), read its step count (``TensorBoard``), save it or its weights
(``ModelCheckpoint``, ``BackupAndRestore``), read and set its weights
(``EarlyStopping(restore_best_weights=True)``, ``BackupAndRestore``'s restore) and stop it
(``model.stop_training``). :class:`ModelView` is a plain Keras model of the user's
architecture, compiled as it trains, which holds the runtime's state when they look:

- *pull* (runtime -> view): the weights (after the ranks' moving statistics are averaged,
  :meth:`sync_statistics`) and the optimizer's whole state (step count, learning rate,
  slots). It runs before the epoch-level events (the start and end of training and of each
  epoch) once the runtime has trained since the last pull, before ``evaluate``, ``predict``
  and ``unwrap``, and, in a single process (the parameter-server modes' coordinator),
  whenever a callback reads the state through the model's methods (``get_weights``,
  ``save``, ``save_weights``, ``export``). Between pulls the view's step count follows every
  update. In a job of ranks a pull is a collective, so every rank pulls at the same points:
  at the epoch-level events, and after every update when a callback saves by batches
  (``ModelCheckpoint`` or ``BackupAndRestore`` with an integer ``save_freq``).
- *push* (view -> runtime): after each event, a learning rate a callback set goes to every
  optimizer of the runtime; weights a callback set or loaded (``set_weights``,
  ``load_weights``: with the optimizer's state they hold) replace the runtime's. In a job of
  ranks, rank 0's view is pushed to every rank.

In a job of ranks the callbacks that write files (``ModelCheckpoint``, ``BackupAndRestore``,
``TensorBoard``, ``CSVLogger``) run on rank 0 only, as Horovod's documentation asks of its
users; what rank 0's restore loads reaches every rank through the push.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import keras
import numpy as np

from ralp._compat import initial_epoch_set_by_callbacks, learning_rate_variable
from ralp.training.optimizer_state import OptimizerState

FILE_WRITERS = (keras.callbacks.ModelCheckpoint, keras.callbacks.BackupAndRestore,
                keras.callbacks.TensorBoard, keras.callbacks.CSVLogger)
_READERS = ("get_weights", "save", "save_weights", "export")  # pull first (one process)
_WRITERS = ("set_weights", "load_weights")  # push after


def check_callbacks(callbacks: Sequence) -> None:
    """Refuse, before training, the callbacks whose meaning ralp cannot keep.

    Raises:
        TrainingSetupError: ``keras.callbacks.SwapEMAWeights`` (it swaps the model's
            variables with the optimizer's moving averages around Keras' own evaluation,
            which ralp's validation does not run inside); anything not a Keras callback.
    """
    from ralp.training.compile import TrainingSetupError

    for callback in callbacks:
        if isinstance(callback, keras.callbacks.SwapEMAWeights):
            raise TrainingSetupError(
                "fit: keras.callbacks.SwapEMAWeights swaps the model's weights with the "
                "optimizer's moving averages around Keras' own evaluation, which ralp's "
                "training does not run inside. Train with the optimizer's use_ema=True and "
                "leave the callback out; after fit, model = trainer.unwrap() and "
                "model.optimizer.finalize_variable_values(model.trainable_variables) gives "
                "the averaged weights")
        if not isinstance(callback, keras.callbacks.Callback):
            raise TrainingSetupError(f"fit: callbacks are keras.callbacks.Callback objects, "
                                     f"got {type(callback).__name__}")


def saves_by_batch(callback) -> bool:
    """Whether ``callback`` saves the model every few updates (an integer ``save_freq``)."""
    if not isinstance(callback, keras.callbacks.ModelCheckpoint | keras.callbacks.BackupAndRestore):
        return False
    freq = getattr(callback, "save_freq", "epoch")
    return isinstance(freq, int) and not isinstance(freq, bool)


def callbacks_here(callbacks: Sequence, is_chief: bool, ranks: int) -> list:
    """The user's callbacks this process runs: all of them, except that in a job of several
    ranks those that write files run on rank 0 only."""
    if is_chief or ranks < 2:
        return list(callbacks)
    return [cb for cb in callbacks if not isinstance(cb, FILE_WRITERS)]


class ModelView:
    """The model callbacks and ``evaluate`` see, in step with ``runtime`` (the module's
    docstring). ``make_model()`` makes it (compiled, its optimizer built); ``ranks``: the
    processes that pull and push together (1: this process alone)."""

    def __init__(self, runtime, make_model: Callable[[], keras.Model], ranks: int = 1):
        self.runtime, self._make, self.ranks = runtime, make_model, ranks
        self._model: keras.Model | None = None
        self.stale = True  # the runtime has trained since the last pull
        self.updates = 0  # updates since the last pull
        self.state: OptimizerState | None = None  # the optimizer's, at the last pull
        self._rate: float | None = None  # the learning rate the runtime holds
        self.changed = False  # a callback set the weights since the last push
        self._with_optimizer = False  # ... while the view held the runtime's optimizer state
        self._quiet = False  # the view's own writes: not a callback's

    @property
    def model(self) -> keras.Model:
        """The view (made at first use; not pulled: see :meth:`pulled`)."""
        if self._model is None:
            self._model = self._make()
            self._watch(self._model)
        return self._model

    def pulled(self) -> keras.Model:
        """The view holding the runtime's current state (a collective in a job of ranks)."""
        self.pull()
        return self.model

    def _watch(self, model: keras.Model) -> None:
        """Note callbacks' writes of the state (and, in one process, pull before reads)."""
        def wrap(name: str, before, after):
            method = getattr(model, name)

            def watched(*args, **kwargs):
                before()
                result = method(*args, **kwargs)
                after()
                return result

            object.__setattr__(model, name, watched)  # past Keras' attribute tracking

        nothing = lambda: None  # noqa: E731
        if self.ranks == 1:
            for name in _READERS:
                wrap(name, self.pull, nothing)
        for name in _WRITERS:
            wrap(name, nothing, self._note_change)

    def _note_change(self) -> None:
        if not self._quiet:
            self.changed = True
            # the view's optimizer state is the runtime's only if nothing trained since the
            # pull (a callback loading weights at the start of training, or restoring the
            # best ones at its end); otherwise only the weights go back
            self._with_optimizer = self._with_optimizer or not self.stale

    # ------------------------------------------------------------------ runtime -> view

    def note_update(self) -> None:
        """The runtime applied one more update."""
        self.stale = True
        self.updates += 1

    def pull(self) -> None:
        """Bring the runtime's state into the view, if it has trained since the last pull."""
        if not self.stale:
            return
        model = self.model
        self.runtime.sync_statistics()
        weights = self.runtime.weights()
        state = self.runtime.optimizer_state()
        self._quiet = True
        try:
            model.set_weights(weights)
            state.assign(model.optimizer, model.trainable_variables)
        finally:
            self._quiet = False
        self.state, self._rate = state, state.learning_rate
        self.stale, self.updates = False, 0

    def follow_steps(self) -> None:
        """The view's step count at the runtime's (cheap: no weights move)."""
        if self._model is not None and self.state is not None:
            self._model.optimizer.iterations.assign(self.state.iterations + self.updates)

    # ------------------------------------------------------------------ view -> runtime

    def push(self, agree: Callable[[bool], bool] = bool) -> None:
        """Give the runtime what callbacks changed: the learning rate, and weights they set
        (with the optimizer state the view holds). ``agree`` makes the weights' push a
        decision every rank takes together."""
        if self._model is None:
            return
        rate = learning_rate_variable(self._model.optimizer)
        if rate is not None:
            value = float(np.asarray(rate))
            if self._rate is None or value != self._rate:
                self.runtime.set_learning_rate(value)
                self._rate = value
        if agree(self.changed):
            model = self._model
            state = (OptimizerState.read(model.optimizer, model.trainable_variables)
                     if self._with_optimizer else None)
            self._quiet = True  # what the callback set supersedes the runtime's: no pull
            try:
                weights = keras.Model.get_weights(model)
            finally:
                self._quiet = False
            self.runtime.set_state(weights, state)
            if state is not None:
                self.state, self._rate = state, state.learning_rate
                self.stale, self.updates = False, 0
            else:  # the runtime's optimizer state is newer than the view's: pull it next
                self.stale = True
            self.changed = self._with_optimizer = False


class ViewCallbacks(keras.callbacks.CallbackList):
    """Keras' callback list, with the view pulled before the events that need it and pushed
    after every event (the module's docstring). ``batch_pulls``: pull before batch events
    too (a callback saves by batches, in a job of ranks); ``agree``: the ranks' agreement on
    a decision (identity in one process); ``per_batch_agree``: whether batch events may use
    it (every rank runs them together)."""

    def __init__(self, callbacks, view: ModelView, *, batch_pulls: bool, agree,
                 per_batch_agree: bool, **kwargs):
        self.view, self.batch_pulls, self.agree = view, batch_pulls, agree
        self.per_batch_agree = per_batch_agree
        super().__init__(callbacks, model=view.model, **kwargs)

    def _around(self, event: Callable, *args, pull: bool, batch: bool = False) -> None:
        view = self.view
        if pull:
            view.pull()
        view.follow_steps()
        event(*args)
        view.push(self.agree if not batch or self.per_batch_agree else (lambda _: False))

    def on_train_begin(self, logs=None):
        self._around(super().on_train_begin, logs, pull=True)

    def on_train_end(self, logs=None):
        self._around(super().on_train_end, logs, pull=True)

    def on_epoch_begin(self, epoch, logs=None):
        self._around(super().on_epoch_begin, epoch, logs, pull=False)

    def on_epoch_end(self, epoch, logs=None):
        self._around(super().on_epoch_end, epoch, logs, pull=True)

    def on_train_batch_begin(self, batch, logs=None):
        self._around(super().on_train_batch_begin, batch, logs, pull=False, batch=True)

    def on_train_batch_end(self, batch, logs=None):
        self._around(super().on_train_batch_end, batch, logs, pull=self.batch_pulls,
                     batch=True)

    def initial_epoch(self) -> int | None:
        """The epoch a callback asked training to start from (``BackupAndRestore``)."""
        return initial_epoch_set_by_callbacks(self.view.model)
