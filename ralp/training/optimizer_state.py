"""An optimizer's whole training state, as numpy, to carry between a Keras model and a mode.

Keras' optimizers keep their state in variables: the update count (``iterations``, which
learning-rate schedules and Adam's bias correction read), the learning rate (unless a
schedule computes it from the count) and one set of slots per trained variable (SGD's
momentum, Adam's moments). :class:`OptimizerState` holds them keyed by the *model's*
trainable variables (their index in ``model.trainable_variables``), so that one state moves
between optimizers built over different parts of the same model: a compiled Keras model's
single optimizer, RALP's head and tail optimizers, Stanza's CONV and FC parts.

``ralp.wrap`` reads the state of a compiled model's optimizer (:func:`read_compiled`) and
every mode's runtime starts from it; ``unwrap()``, checkpoints and the model callbacks see
(:mod:`ralp.training.model_view`) get the runtime's live state back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ralp._compat import learning_rate_variable, optimizer_slots
from ralp.training.compile import TrainingSetupError


@dataclass
class OptimizerState:
    """An optimizer's state: ``iterations`` (updates applied), ``learning_rate`` (its value;
    None where a schedule computes it from ``iterations``) and ``slots``
    ({index into the model's trainable variables: {slot name: value}})."""

    iterations: int = 0
    learning_rate: float | None = None
    slots: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def read(cls, optimizer, variables: Sequence, indices: Sequence[int] | None = None,
             read: Callable = np.asarray) -> OptimizerState:
        """The state of ``optimizer`` over ``variables`` (which are the model's trainable
        variables ``indices``; default: all of them, in order). ``read`` turns a variable
        into numpy (a distributed variable: its local copy)."""
        indices = range(len(variables)) if indices is None else indices
        slots = {}
        for k, named in zip(indices, optimizer_slots(optimizer, variables), strict=True):
            if named:
                slots[k] = {name: np.array(read(slot), copy=True) for name, slot in named.items()}
        rate = learning_rate_variable(optimizer)
        return cls(int(np.asarray(read(optimizer.iterations))),
                   None if rate is None else float(np.asarray(read(rate))), slots)

    def merged(self, other: OptimizerState) -> OptimizerState:
        """This state with ``other``'s slots added (RALP's head and tail, Stanza's parts)."""
        return OptimizerState(self.iterations, self.learning_rate, {**self.slots, **other.slots})

    def assign(self, optimizer, variables: Sequence, indices: Sequence[int] | None = None,
               ) -> None:
        """Set ``optimizer`` (built over ``variables``, the model's trainable variables
        ``indices``) to this state. A slot the state lacks keeps its value (a variable the
        state's optimizer had not trained yet)."""
        indices = range(len(variables)) if indices is None else indices
        optimizer.iterations.assign(self.iterations)
        rate = learning_rate_variable(optimizer)
        if rate is not None and self.learning_rate is not None:
            rate.assign(self.learning_rate)
        for k, named in zip(indices, optimizer_slots(optimizer, variables), strict=True):
            for name, slot in named.items():
                value = self.slots.get(k, {}).get(name)
                if value is None:
                    continue
                if tuple(value.shape) != tuple(slot.shape):
                    raise TrainingSetupError(
                        f"the optimizer's {name!r} slot of trainable variable {k} has shape "
                        f"{value.shape}, the model's variable {tuple(slot.shape)}")
                slot.assign(value)

    def is_fresh(self) -> bool:
        """Whether nothing has been trained with it (no update, no slot)."""
        return self.iterations == 0 and not self.slots


def read_compiled(optimizer, model) -> OptimizerState | None:
    """The state of a compiled model's ``optimizer`` (an instance built over the model's
    trainable variables), or None: an optimizer given by name, or one not built yet, starts
    fresh. Reads it now: an optimizer made before a process connects to a
    parameter-server cluster cannot be read afterwards.

    Raises:
        TrainingSetupError: the optimizer holds state ralp cannot carry (variables that are
            neither its count, its learning rate nor a slot of one of the model's variables).
    """
    import keras

    if not isinstance(optimizer, keras.optimizers.Optimizer) or not optimizer.built:
        return None
    variables = model.trainable_variables
    state = OptimizerState.read(optimizer, variables)
    known = {id(optimizer.iterations)} | {id(v) for named in optimizer_slots(optimizer, variables)
                                          for v in named.values()}
    rate = learning_rate_variable(optimizer)
    if rate is not None:
        known.add(id(rate))
    other = [v.path for v in optimizer.variables if id(v) not in known]
    if other:
        raise TrainingSetupError(
            f"the optimizer {optimizer.name!r} holds state ralp cannot carry into training "
            f"({', '.join(other[:3])}): it is neither the update count, the learning rate nor "
            "a slot of the model's trainable variables (was it built for another model?). "
            "Compile the model with a fresh optimizer of the same kind")
    return state
