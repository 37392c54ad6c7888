"""The one trainer ``ralp.wrap`` returns, in every mode: Keras' ``fit``, ``evaluate`` and
``predict``, and ``unwrap`` back to a plain Keras model.

A :class:`Trainer` holds its mode's *runtime* (how steps run: a parameter-server cluster's
coordinator, or this process's rank of an allreduce job) and the user's training set-up
(:mod:`ralp.training.compile`). ``fit`` checks the data against the model and the loss
(:mod:`ralp.training.fit_inputs`), resolves the loss and metrics for the labels
(:mod:`ralp.training.objective`) and runs the one fit loop (:mod:`ralp.training.fit_loop`).
``evaluate`` and ``predict`` are Keras' own, on a plain model holding the current weights
(in the calling process: the coordinator, or every rank); ``unwrap`` gives such a model
compiled as the model trains, its optimizer holding the trained state.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence

import keras
import numpy as np

from ralp._compat import dataset_from_graph, dataset_graph
from ralp.errors import InvalidArgumentError
from ralp.training.compile import TrainingSetup, clone_uncompiled, optimizer_factory
from ralp.training.fit_inputs import (
    check_batch,
    check_label_dtype,
    fit_data,
    keras_spec,
    standard_data,
    standard_validation,
)
from ralp.training.history import History
from ralp.training.model_view import ModelView, check_callbacks
from ralp.training.objective import Objective, spec_of
from ralp.training.runtime import Runtime
from ralp.training.validation import Validation, validation_for


def _positive(name: str, value, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")


def _verbosity(verbose) -> int:
    if verbose == "auto":
        return 1
    if verbose not in (0, 1, 2):
        raise InvalidArgumentError(f"verbose is 'auto', 0, 1 or 2, got {verbose!r}")
    return int(verbose)


def _fresh(identifier):
    """A metric or loss identifier, an object made anew from its config (not shared)."""
    if isinstance(identifier, dict):
        return keras.saving.deserialize_keras_object(identifier)
    if isinstance(identifier, keras.metrics.Metric | keras.losses.Loss):
        return identifier.__class__.from_config(identifier.get_config())
    return identifier


def _label_spec(x, y):
    """The labels' per-batch spec, from arrays, a dataset or a dataset function."""
    import tensorflow as tf

    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
    elif callable(x) and not isinstance(x, np.ndarray):
        from ralp.training.data import Sharding

        spec = tf.function(lambda: x(Sharding(1, False).context(0))).get_concrete_function(
        ).structured_outputs.element_spec
    else:
        y = np.asarray(y) if y is not None else np.zeros((0,), np.int32)
        check_label_dtype(y.dtype, "fit")
        return spec_of((None, *y.shape[1:]), y.dtype)
    if not isinstance(spec, tuple) or len(spec) < 2:
        raise InvalidArgumentError(f"the data's batches are {spec}: give (images, labels) or "
                                   "(images, labels, sample weights)")
    check_label_dtype(spec[1].dtype, "fit")
    return keras_spec(spec[1])


class Trainer:
    """A Keras model trained by one of ralp's modes (build it with ``ralp.wrap``).

    Attributes: ``mode`` (the mode it trains in: "ps", "ralp", "horovod", "stanza" or
    "collective"), ``plan`` (which layers run where; None in the data-parallel modes),
    ``profile``, ``auto`` (mode "auto": what the planner chose and why), ``model`` (the
    model as the mode trains it: placed on the cluster, or this rank's replica). Callbacks,
    ``evaluate`` and ``predict`` get a plain Keras model holding its current state
    (:mod:`ralp.training.model_view`).
    """

    def __init__(self, runtime: Runtime, setup: TrainingSetup, original: keras.Model, *,
                 batch_size: int | None = None, auto=None):
        self.runtime, self.setup, self.original = runtime, setup, original
        self.batch_size = batch_size
        self.auto = auto
        self._objectives: dict = {}
        # what callbacks, evaluate and predict see: made at first use, kept in step
        self.view = ModelView(runtime, self._make_view, runtime.size)

    mode = property(lambda self: self.runtime.mode)
    plan = property(lambda self: self.runtime.plan)
    profile = property(lambda self: self.runtime.profile)
    model = property(lambda self: self.runtime.model)

    # ------------------------------------------------------------------ fit

    def fit(self, x=None, y=None, batch_size: int | None = None, epochs: int = 1,
            verbose="auto", callbacks: Sequence[keras.callbacks.Callback] | None = None,
            validation_split: float = 0.0, validation_data=None, shuffle: bool = True,
            class_weight: dict | None = None, sample_weight=None, initial_epoch: int = 0,
            steps_per_epoch: int | None = None, validation_steps: int | None = None,
            validation_batch_size: int | None = None,
            validation_freq: int | Collection[int] = 1, *,
            checkpoint_dir: str | os.PathLike | None = None,
            checkpoint_every: int | None = None, seed: int | None = None) -> History:
        """Train as Keras' ``Model.fit`` does, on this trainer's mode.

        Args:
            x, y: features and labels as arrays (``x`` an array, or for a model of several
                inputs a list of arrays in ``model.inputs`` order or a dict by input name);
                or ``x`` a ``tf.data.Dataset`` of batches (``(x, y)`` or ``(x, y,
                sample_weight)``, ``x`` a tensor, tuple or dict as above), or a dataset
                function ``fn(tf.distribute.InputContext) -> tf.data.Dataset`` of one
                worker's batches.
            batch_size: the global batch: the samples of one update of the weights, split
                over the workers in a synchronous mode (default: ``wrap``'s, else 32).
            epochs, initial_epoch, steps_per_epoch, shuffle, class_weight, sample_weight,
            validation_split, validation_data, validation_steps, validation_batch_size,
            validation_freq, callbacks: as Keras' ``fit`` (docs/explanation/training-semantics.md says where a
                mode differs).
            verbose: "auto" or 1 (a progress bar, then the epoch's line), 2 (one line per
                epoch), 0 (nothing); printed by the coordinator, or by rank 0.
            checkpoint_dir, checkpoint_every: save every ``checkpoint_every`` updates and at
                each epoch's end, and go on from the newest checkpoint there.
            seed: the data's shuffling (every worker agrees on it); None: drawn once.

        Returns:
            A :class:`ralp.training.history.History` (Keras' ``History``).

        Raises:
            ralp.TrainingSetupError: data the model or the loss cannot take.
            ralp.InvalidArgumentError: a malformed argument.
        """
        if batch_size is None:
            batch_size = self.batch_size or 32
        _positive("epochs", epochs, allow_none=False)
        _positive("steps_per_epoch", steps_per_epoch)
        _positive("checkpoint_every", checkpoint_every)
        if isinstance(initial_epoch, bool) or not isinstance(initial_epoch, int) or not (
                0 <= initial_epoch < epochs):
            raise InvalidArgumentError(f"initial_epoch must be an integer in [0, epochs={epochs}),"
                                       f" got {initial_epoch!r}")
        if checkpoint_every is not None and checkpoint_dir is None:
            raise InvalidArgumentError("checkpoint_every needs a checkpoint_dir to write to")
        verbose = _verbosity(verbose)
        check_callbacks(callbacks or [])
        x, y = standard_data(x, y, self.original)  # any structure Keras takes: the model's
        validation_data = standard_validation(validation_data, self.original)
        x, y, sample_weight, validation = validation_for(
            x, y, sample_weight, validation_data=validation_data,
            validation_split=validation_split, validation_freq=validation_freq,
            validation_steps=validation_steps,
            validation_batch_size=validation_batch_size or batch_size)
        if validation is not None:
            validation.x = _made_here(validation.x)
        if not (callable(x) or hasattr(x, "element_spec")):  # arrays: batched by the fit
            check_batch(batch_size, self.runtime.synchronous_workers)
        objective = self._objective(_label_spec(x, y))
        data = fit_data(x, y, sample_weight=sample_weight, class_weight=class_weight,
                        batch_size=batch_size, steps_per_epoch=steps_per_epoch, shuffle=shuffle,
                        model=self.original, loss=objective.loss)
        self.runtime.check_data(data)
        store = None if checkpoint_dir is None else self.runtime.checkpoint_store(
            checkpoint_dir, checkpoint_every)
        from ralp.training.fit_loop import FitLoop

        loop = FitLoop(self.runtime, data, objective, epochs=epochs, initial_epoch=initial_epoch,
                       callbacks=callbacks, verbose=verbose, validation=validation, store=store,
                       restart_timeout=self.runtime.restart_timeout, seed=seed,
                       evaluate=self._validate, view=self.view)
        return loop.run()

    def _objective(self, y_spec) -> Objective:
        key = (tuple(y_spec.shape[1:]), y_spec.dtype)
        if key not in self._objectives:
            out = self.original.outputs[0]
            self._objectives[key] = Objective(
                self.setup.loss, self.setup.metrics, self.setup.weighted_metrics,
                y_spec=y_spec, pred_spec=spec_of(out.shape, out.dtype), where="fit")
        return self._objectives[key]

    def _validate(self, validation: Validation) -> dict[str, float]:
        model = self._current()
        if validation.y is None and not isinstance(validation.x, np.ndarray):
            return model.evaluate(validation.x, steps=validation.steps, verbose=0,
                                  return_dict=True)
        return model.evaluate(validation.x, validation.y, sample_weight=validation.sample_weight,
                              batch_size=validation.batch_size, steps=validation.steps,
                              verbose=0, return_dict=True)

    # ------------------------------------------------------------------ evaluate, predict

    def evaluate(self, x=None, y=None, batch_size: int | None = None, verbose="auto",
                 sample_weight=None, steps: int | None = None, callbacks=None,
                 return_dict: bool = False):
        """Keras' ``Model.evaluate`` of the current weights, in this process (every rank
        of an allreduce job evaluates the same model). Returns what Keras returns: the loss,
        or ``[loss, *metrics]``, or a dict with ``return_dict``."""
        return self._current().evaluate(_made_here(x), y, batch_size=batch_size,
                                        verbose=_verbosity(verbose) if self.runtime.is_chief
                                        else 0, sample_weight=sample_weight, steps=steps,
                                        callbacks=callbacks, return_dict=return_dict)

    def predict(self, x, batch_size: int | None = None, verbose="auto",
                steps: int | None = None, callbacks=None):
        """Keras' ``Model.predict`` with the current weights, in this process: the same as
        ``trainer.unwrap().predict(...)``."""
        return self._current().predict(_made_here(x), batch_size=batch_size,
                                       verbose=_verbosity(verbose) if self.runtime.is_chief
                                       else 0, steps=steps, callbacks=callbacks)

    def get_weights(self) -> list[np.ndarray]:
        """The current weights, in ``model.get_weights()`` order (a collective in the
        allreduce modes: every rank calls it)."""
        return self._current().get_weights()

    # ------------------------------------------------------------------ unwrap

    def _clone(self, weights: list | None) -> keras.Model:
        import tensorflow as tf

        with tf.device("/cpu:0"):  # a copy beside the training: no accelerator memory
            plain = clone_uncompiled(self.original)
        if weights is not None:
            plain.set_weights(weights)
        return plain

    def _compile(self, plain: keras.Model) -> keras.Optimizer:
        """Compile ``plain`` as the model trains: the user's compile arguments, with the
        optimizer (built, fresh), loss and metrics it trains with. Returns the optimizer."""
        import tensorflow as tf

        setup = self.setup
        config = {}
        if setup.compile_config:
            config = dict(keras.saving.deserialize_keras_object(setup.compile_config))
        with tf.device("/cpu:0"):
            optimizer = optimizer_factory(self.runtime.optimizer_template(setup.optimizer))()
            optimizer.build(plain.trainable_variables)
        config.update(optimizer=optimizer, loss=_fresh(setup.loss),
                      metrics=[_fresh(m) for m in setup.metrics] or None,
                      weighted_metrics=[_fresh(m) for m in setup.weighted_metrics] or None)
        plain.compile(**config)
        return optimizer

    def _make_view(self) -> keras.Model:
        plain = self._clone(None)  # its state comes with its first pull
        self._compile(plain)
        return plain

    def _current(self) -> keras.Model:
        return self.view.pulled()

    def unwrap(self) -> keras.Model:
        """A plain Keras model of the user's architecture holding the trained weights,
        compiled as the model trains (the user's compile arguments; the optimizer, loss and
        metrics trained with), its optimizer holding the trained state (step count, learning
        rate as callbacks left it, momenta, moments): saved and loaded again, ``model.fit``
        (or ``ralp.wrap``) goes on where this trainer stopped. (In the allreduce modes every
        rank calls it: the ranks' state is gathered.)"""
        view = self._current()
        plain = self._clone(view.get_weights())
        optimizer = self._compile(plain)
        self.view.state.assign(optimizer, plain.trainable_variables)
        return plain

    def save_checkpoint(self, path: str) -> str:
        """Save every variable and the optimizers' state (wherever they live); returns the
        checkpoint's path. Parameter-server modes; elsewhere ``fit(checkpoint_dir=...)`` or
        ``unwrap().save(...)``."""
        return self.runtime.save_checkpoint(path)

    def restore_checkpoint(self, path: str) -> None:
        """Restore a checkpoint :meth:`save_checkpoint` (or ``fit``) wrote."""
        self.runtime.restore_checkpoint(path)

    def __repr__(self) -> str:
        return f"<ralp.Trainer mode={self.mode!r} {self.runtime.describe()}>"


def _made_here(x):
    """``x``, or a ``tf.data.Dataset`` made again in this process's current context: a
    dataset made before ``ralp.wrap`` connected to the cluster (or restarted TensorFlow)
    belongs to a context that is gone, and a plain Keras model here could not iterate it."""
    import tensorflow as tf

    if not isinstance(x, tf.data.Dataset):
        return x
    return dataset_from_graph(dataset_graph(x), x.element_spec)
