"""A user's own model from a saved ``.keras`` file, where the zoo's name would go: the bench
and the planner measure and plan it as they do the zoo's models."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ralp.errors import InvalidArgumentError

MODEL_FILE_SUFFIX = ".keras"
DEFAULT_FILE_BATCH_SIZE = 32


def is_model_file(name: str) -> bool:
    """Whether ``name`` names a saved model file rather than a zoo model."""
    return isinstance(name, str) and name.endswith(MODEL_FILE_SUFFIX)


def bench_model_argument(model: str) -> str:
    """How ``python -m ralp.bench`` is told to run ``model`` (a zoo name or a saved file)."""
    return f"--keras-model {model}" if is_model_file(model) else f"--models {model}"


def load_model_file(path: str):
    """The model saved at ``path`` (uncompiled); a missing or unreadable file raises
    ``InvalidArgumentError`` saying how to save one."""
    if not os.path.isfile(path):
        raise InvalidArgumentError(f"no such model file: {path!r}; save your model with "
                                   "model.save('name.keras')")
    import keras

    try:
        return keras.models.load_model(path, compile=False)
    except Exception as e:  # noqa: BLE001 - Keras raises many types for bad files
        raise InvalidArgumentError(
            f"could not load {path!r} as a Keras model ({type(e).__name__}: {e}); models "
            "with custom layers must be importable here") from None


@dataclass(frozen=True)
class FileFacts:
    """What the bench and the planner read of a saved model: its images' side and channels
    (its first input of images), classes, outputs, and every input as the model takes it
    by key (``(key, per-sample shape, dtype)``, in ``model.inputs`` order; the key is the
    model's dict key, or the input's name)."""

    name: str
    image: int
    classes: int
    channels: int
    outputs: int
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]
    image_key: str


_FACTS: dict[str, FileFacts] = {}  # per path, read once per process


def input_keys(model) -> tuple[str, ...]:
    """Each input's key, in ``model.inputs`` order, as Keras maps a dict of features: the
    model's own dict key for a model built on a dict of inputs, else the input's name."""
    structure = getattr(model, "input", None)  # a Sequential never called has none
    if isinstance(structure, dict):
        by_id = {id(t): k for k, t in structure.items()}
        return tuple(by_id[id(t)] for t in model.inputs)
    return tuple(t.name for t in model.inputs)


def _facts_of(model, path: str) -> FileFacts:
    images = [t for t in model.inputs if len(t.shape) == 4]
    shape = (images or model.inputs)[0].shape
    if len(shape) != 4 or shape[1] is None or shape[1] != shape[2]:
        raise InvalidArgumentError(f"{path}: the bench feeds square images (batch, side, "
                                   f"side, channels) to the model's first input of images; "
                                   f"the model takes {tuple(shape)}")
    keys = input_keys(model)
    inputs = tuple((k, tuple(t.shape[1:]), str(t.dtype)) for k, t in zip(
        keys, model.inputs, strict=True))
    if any(d is None for _, s, _ in inputs for d in s):
        raise InvalidArgumentError(f"{path}: the bench feeds inputs of fixed shapes; the model "
                                   f"takes {[tuple(t.shape) for t in model.inputs]}")
    _FACTS[path] = FileFacts(model.name, int(shape[1]), int(model.outputs[0].shape[-1]),
                             int(shape[3]), len(model.outputs), inputs,
                             next(k for k, t in zip(keys, model.inputs, strict=True)
                                  if t is images[0]))
    return _FACTS[path]


def file_facts(path: str) -> FileFacts:
    """The :class:`FileFacts` of the model saved at ``path``."""
    return _FACTS[path] if path in _FACTS else _facts_of(load_model_file(path), path)


def model_file_facts(path: str) -> tuple[int, int, int]:
    """(input side, classes, channels) of the image classifier saved at ``path``."""
    facts = file_facts(path)
    return facts.image, facts.classes, facts.channels


def build_from_file(path: str, num_classes: int, image_size: int | None):
    """The saved model, checked against the run's classes and image side (loaded once: its
    facts are kept for :func:`model_file_facts`)."""
    model = load_model_file(path)
    facts = _facts_of(model, path)
    image, classes = facts.image, facts.classes
    if (image_size not in (None, image)) or num_classes != classes:
        raise InvalidArgumentError(
            f"{path} takes {image} px images and has {classes} classes; the run asked for "
            f"{image_size} px and {num_classes} classes (leave --image-size and "
            "--num-classes out for a model file)")
    return model
