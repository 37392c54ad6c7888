"""The feature structures ``fit`` takes for a model's inputs, as Keras' functional models
take them, and the one form ralp trains on.

A model of one input takes an array (or tensor), or a dict ``{input name: array}``; a model
of several inputs takes a list (or tuple) of arrays in the order of ``model.inputs``, or a
dict keyed by its inputs' names (a model built on a dict of inputs, ``keras.Model({"a":
...}, ...)``: by that dict's keys, and a list only when they are in sorted order, as Keras
asks). A dict's other keys are left out, as Keras leaves them.

:class:`ModelInputs` turns any of these into the model's own form: a single array for one
input, a tuple in ``model.inputs`` order for a list of inputs, a dict by the model's keys
for a dict of inputs. Arrays are turned once; a dataset gets one ``map`` that does it per
batch; the steps, the head of a split model (:mod:`ralp.placement.rewriter`) and Keras'
``evaluate`` all take that form. A structure that does not fit is a
:class:`TrainingSetupError` naming the model's inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ralp._compat import is_functional
from ralp.training.compile import TrainingSetupError


@dataclass(frozen=True)
class ModelInputs:
    """A model's inputs: each one's key (its name, or its key in the model's dict of
    inputs), symbolic tensor, and how the model's call takes them (``kind``)."""

    model_name: str
    keys: tuple[str, ...]  # in model.inputs order
    tensors: tuple  # model.inputs (keras.KerasTensor)
    kind: str  # "single" | "list" | "dict"
    takes_list: bool = True  # a dict model whose keys were given unsorted takes no list

    @classmethod
    def of(cls, model) -> ModelInputs:
        tensors = tuple(model.inputs)
        structure = model.input if is_functional(model) else None
        if isinstance(structure, Mapping):
            by_id = {id(t): k for k, t in structure.items()}
            return cls(model.name, tuple(by_id.get(id(t), t.name) for t in tensors), tensors,
                       "dict", list(structure) == sorted(structure))
        kind = "single" if len(tensors) == 1 else "list"
        return cls(model.name, tuple(t.name for t in tensors), tensors, kind)

    def __len__(self) -> int:
        return len(self.tensors)

    def describe(self) -> str:
        """How to give this model's features, for messages."""
        if self.kind == "single":
            return f"one array shaped {_shape(self.tensors[0])} (or {{{self.keys[0]!r}: ...}})"
        shapes = ", ".join(f"{k!r}: {_shape(t)}" for k, t in zip(self.keys, self.tensors,
                                                                   strict=True))
        if self.kind == "dict":
            return f"{len(self)} inputs, a dict {{{shapes}}}"
        return (f"{len(self)} inputs, a list of arrays in this order or a dict by name: "
                f"{{{shapes}}}")

    def flatten(self, x, where: str) -> list:
        """``x``'s features for each input, in ``model.inputs`` order."""
        what = f"{where}: model {self.model_name!r} takes {self.describe()}"
        if isinstance(x, Mapping):
            missing = [k for k in self.keys if k not in x]
            if missing:
                raise TrainingSetupError(f"{what}; the features' dict has keys "
                                         f"{sorted(map(str, x))}, without {missing}")
            return [x[k] for k in self.keys]
        if isinstance(x, list | tuple) and not (self.kind == "single" and not any(
                hasattr(v, "shape") or isinstance(v, Mapping) for v in x)):
            if not self.takes_list:
                raise TrainingSetupError(f"{what}; got a {type(x).__name__}: its keys are not "
                                         "in sorted order, so give the dict")
            if len(x) != len(self):
                raise TrainingSetupError(f"{what}; got a {type(x).__name__} of {len(x)}")
            if any(isinstance(v, Mapping | list | tuple) for v in x):
                raise TrainingSetupError(f"{what}; got a nested {type(x).__name__}")
            return list(x)
        if len(self) != 1:
            raise TrainingSetupError(f"{what}; got one array")
        return [x]

    def pack(self, flat: Sequence):
        """The model's own form of ``flat`` (one value per input, in ``model.inputs`` order)."""
        if self.kind == "single":
            return flat[0]
        if self.kind == "dict":
            return dict(zip(self.keys, flat, strict=True))
        return tuple(flat)

    def standard(self, x, where: str):
        """``x`` in the model's own form (the module's docstring)."""
        return self.pack(self.flatten(x, where))


def _shape(tensor) -> tuple:
    return tuple(tensor.shape)


def one_label(y, where: str):
    """The labels of the model's one output: an array, or a list of one array (as Keras
    takes them for one output)."""
    arrays = isinstance(y, list | tuple) and any(
        getattr(v, "shape", None) is not None and tuple(v.shape) != () for v in y)
    if arrays and len(y) == 1:
        return y[0]
    if isinstance(y, Mapping) or arrays:
        raise TrainingSetupError(f"{where}: the labels are a {type(y).__name__} of several "
                                 "parts; ralp trains models of one output: give one array "
                                 "of labels")
    return y
