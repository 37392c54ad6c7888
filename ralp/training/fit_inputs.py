"""What ``fit`` was given, as :mod:`ralp.training.data`'s forms, checked before anything runs.

The features come in any structure Keras takes for the model's inputs (one array, a list or a
dict of arrays; a dataset's features a tensor, a tuple or a dict), turned into the model's
own form (:mod:`ralp.training.features`). Checked against the model and the loss, with a
:class:`TrainingSetupError` that says what to fix: features that do not match the model's
inputs (structure, shape, numbers), a dataset of single samples (not batched), images that
hold NaN or infinite values, a different number of samples, labels and weights, labels that
are not numbers (strings), and labels the loss cannot take (sparse cross-entropy: integer
class ids in ``[0, classes)``; categorical: one row of ``classes`` values per image; binary:
values in [0, 1] shaped as the output; any other loss: labels shaped as the output). Arrays
are checked whole; a dataset by its element spec and its first batch; a dataset function by
its element spec (it runs on the workers only).
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import numpy as np
import tensorflow as tf

from ralp.errors import InvalidArgumentError, InvalidTypeError
from ralp.training.compile import TrainingSetupError
from ralp.training.data import (
    ArrayData,
    DatasetData,
    FunctionData,
    Sharding,
    TrainingData,
    class_weight_map,
    class_weights,
)
from ralp.training.features import ModelInputs, one_label

SPARSE = ("SparseCategoricalCrossentropy", "sparse_categorical_crossentropy")
CATEGORICAL = ("CategoricalCrossentropy", "CategoricalFocalCrossentropy",
               "categorical_crossentropy", "categorical_focal_crossentropy")
BINARY = ("BinaryCrossentropy", "BinaryFocalCrossentropy", "binary_crossentropy",
          "binary_focal_crossentropy")


@dataclass(frozen=True)
class LabelRule:
    """What labels a loss takes, for the checks: its kind and the model's output shape."""

    kind: str  # "sparse" | "categorical" | "binary" | "other"
    output_shape: tuple  # per sample
    loss_name: str

    @classmethod
    def of(cls, loss, model) -> LabelRule:
        name = type(loss).__name__
        fn = getattr(getattr(loss, "fn", None), "__name__", "")
        kind = next((k for k, names in (("sparse", SPARSE), ("categorical", CATEGORICAL),
                                        ("binary", BINARY)) if name in names or fn in names),
                    "other")
        return cls(kind, tuple(model.outputs[0].shape[1:]), getattr(loss, "name", name))

    @property
    def classes(self) -> int:
        return int(self.output_shape[-1]) if self.output_shape else 1


def check_images(shape, dtype, model, where: str, index: int = 0) -> None:
    """Features of per-sample ``shape`` and ``dtype`` against the model's input ``index``."""
    inputs = ModelInputs.of(model)
    what = "images" if len(inputs) == 1 else f"features for input {inputs.keys[index]!r}"
    if not (np.issubdtype(np.dtype(dtype), np.number) or np.dtype(dtype) == np.bool_):
        raise TrainingSetupError(f"{where}: the {what} are {np.dtype(dtype)}, not numbers")
    expected = tuple(inputs.tensors[index].shape[1:])
    got = tuple(shape)
    if len(got) != len(expected) or any(e is not None and g is not None and e != g
                                        for e, g in zip(expected, got, strict=True)):
        raise TrainingSetupError(
            f"{where}: {what} of shape {got} per sample, but {model.name!r} takes "
            f"{expected} (batch axis left out): resize or reshape them, or build the model "
            f"for this input")


def check_label_dtype(dtype, where: str) -> None:
    """Labels must be numbers: Keras' losses take no strings."""
    if isinstance(dtype, tf.DType):
        numeric, text = dtype.is_floating or dtype.is_integer or dtype.is_bool, dtype.name
    else:
        dtype = np.dtype(dtype)
        numeric, text = np.issubdtype(dtype, np.number) or dtype == np.bool_, str(dtype)
    if not numeric:
        kind = "strings" if text in ("string", "object") or text[1:2] in ("U", "S") else text
        raise TrainingSetupError(
            f"{where}: the labels are {kind} ({text}), not numbers: map them "
            "to integer class ids first (keras.layers.StringLookup, or classes, y = "
            "np.unique(y, return_inverse=True)) and build the model for that many classes")


def check_label_shape(shape, rule: LabelRule, where: str) -> None:
    shape, out = tuple(shape), rule.output_shape
    if rule.kind == "sparse":
        ok = shape == out[:-1] or shape == (*out[:-1], 1)
        want = f"integer class ids, shaped {out[:-1] or '(one per image)'}"
    elif rule.kind in ("categorical", "binary"):
        ok = shape == out or (rule.kind == "binary" and shape == out[:-1] and out[-1:] == (1,))
        want = f"one row of {rule.classes} values per image" if rule.kind == "categorical" \
            else f"values in [0, 1] shaped {out}"
    else:
        ok = shape == out or shape == out[:-1] or (out[-1:] == (1,) and shape == out[:-1])
        want = f"labels shaped as the output, {out}"
    if not ok:
        hint = ""
        if rule.kind == "sparse" and shape == out:
            hint = ("; these look one-hot: compile with loss='categorical_crossentropy', or "
                    "give integer class ids (np.argmax(y, -1))")
        elif rule.kind == "categorical" and shape in (out[:-1], (*out[:-1], 1)):
            hint = ("; these look like class ids: compile with "
                    "loss='sparse_categorical_crossentropy', or one-hot encode them")
        raise TrainingSetupError(f"{where}: labels of shape {shape} per sample, but the loss "
                                 f"{rule.loss_name!r} takes {want}{hint}")


def check_label_values(y: np.ndarray, rule: LabelRule, where: str) -> None:
    y = np.asarray(y)
    if not np.issubdtype(y.dtype, np.number) and y.dtype != np.bool_:
        raise TrainingSetupError(f"{where}: labels are {y.dtype}, not numbers")
    if y.size and np.issubdtype(y.dtype, np.floating) and not np.isfinite(y).all():
        raise TrainingSetupError(f"{where}: the labels hold NaN or infinite values")
    if rule.kind == "sparse" and y.size:
        whole = np.issubdtype(y.dtype, np.integer) or bool(np.all(np.mod(y, 1) == 0))
        if not whole:
            raise TrainingSetupError(f"{where}: labels must be integer class ids for "
                                     f"{rule.loss_name!r}, got {y.dtype} values such as "
                                     f"{y.flat[0]!r}")
        low, high = int(y.min()), int(y.max())
        if low < 0 or high >= rule.classes:
            outside = int(np.sum((y < 0) | (y >= rule.classes)))
            raise TrainingSetupError(
                f"{where}: {outside} labels lie outside [0, {rule.classes}) (found "
                f"{low}..{high}); the model has {rule.classes} output classes: labels are "
                f"class ids 0..{rule.classes - 1}")
    if rule.kind in ("categorical", "binary") and y.size and (y.min() < 0 or y.max() > 1):
        raise TrainingSetupError(f"{where}: labels for {rule.loss_name!r} are values in "
                                 f"[0, 1], found {y.min()}..{y.max()}")


def _check_arrays(x, y, weights, model, rule: LabelRule, where: str) -> None:
    features = tf.nest.flatten(x)
    lengths = {len(a) for a in features}
    if not (lengths == {len(y)} and (weights is None or len(weights) == len(y))):
        sizes = (f"{'/'.join(str(len(a)) for a in features)} images, {len(y)} labels" +
                 ("" if weights is None else f" and {len(weights)} sample weights"))
        raise TrainingSetupError(f"{where}: {sizes}; give one of each per image")
    for index, array in enumerate(features):
        check_images(array.shape[1:], array.dtype, model, where, index)
        if np.issubdtype(array.dtype, np.number) and not np.isfinite(array).all():
            bad = int(array.size - np.isfinite(array).sum())
            raise TrainingSetupError(f"{where}: the images hold {bad} NaN or infinite values; "
                                     "clean or impute them first (training would reach a NaN "
                                     "loss)")
    check_label_dtype(y.dtype, where)
    check_label_shape(y.shape[1:], rule, where)
    check_label_values(y, rule, where)


def _check_spec(spec, model, rule: LabelRule, where: str) -> None:
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise TrainingSetupError(f"{where}: the dataset's elements are {spec}; give batches of "
                                 "(features, labels) or (features, labels, sample weights)")
    for index, feature in enumerate(tf.nest.flatten(spec[0])):
        check_images(feature.shape[1:], feature.dtype.as_numpy_dtype, model, where, index)
    check_label_shape(spec[1].shape[1:], rule, where)


def _batch_size_of(spec) -> int | None:
    dim = tf.nest.flatten(spec[0])[0].shape[0]
    return int(dim) if dim is not None else None


# ------------------------------------------------------------------ the features' structure


def standard_data(x, y, model, where: str = "fit"):
    """``(x, y)`` with the features in the model's own form (arrays as numpy arrays; a
    dataset mapped, or a dataset function wrapped, to give that form), checked for their
    structure: features for every input, batched, labels of numbers."""
    inputs = ModelInputs.of(model)
    if isinstance(x, tf.data.Dataset):
        return standard_dataset(x, inputs, where), y
    if callable(x) and not isinstance(x, np.ndarray):
        return _standard_function(x, inputs, where), y
    if x is None or y is None:
        return x, y
    x = inputs.pack([np.asarray(a) for a in inputs.flatten(x, where)])
    y = np.asarray(one_label(y, where))
    check_label_dtype(y.dtype, where)
    return x, y


def standard_validation(validation_data, model, where: str = "fit (validation_data)"):
    """``validation_data`` with its features in the model's own form, checked (as
    :func:`standard_data`)."""
    if isinstance(validation_data, tuple | list) and len(validation_data) in (2, 3):
        x, y = standard_data(validation_data[0], validation_data[1], model, where)
        return (x, y, *validation_data[2:])
    if isinstance(validation_data, tf.data.Dataset):
        return standard_data(validation_data, None, model, where)[0]
    return validation_data


def standard_dataset(dataset: tf.data.Dataset, inputs: ModelInputs, where: str):
    """``dataset`` checked and, if its features are in another structure, mapped to the
    model's own form (a dataset already in it is returned as it is)."""
    if not isinstance(dataset, tf.data.Dataset):
        return dataset  # a dataset function's mistake: said where its result is checked
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise TrainingSetupError(f"{where}: the dataset's elements are {spec}; give batches of "
                                 "(features, labels) or (features, labels, sample weights)")
    features = inputs.flatten(spec[0], where)
    labels = one_label(spec[1], where)
    _check_batched(features, labels, inputs, where)
    check_label_dtype(labels.dtype, where)
    standard = inputs.pack(features)
    try:
        tf.nest.assert_same_structure((spec[0], spec[1]), (standard, labels))
        return dataset
    except (TypeError, ValueError):
        pass

    def restructure(x, y, *weights):
        return (inputs.standard(x, where), one_label(y, where), *weights)

    return dataset.map(restructure)


def _check_batched(features, labels, inputs: ModelInputs, where: str) -> None:
    """Refuse a dataset of single samples: its features lack the batch axis."""
    for spec, tensor in zip(features, inputs.tensors, strict=True):
        if spec.shape.rank is not None and spec.shape.rank == len(tensor.shape) - 1:
            raise TrainingSetupError(
                f"{where}: the dataset's elements are single samples (features shaped "
                f"{tuple(spec.shape)}, labels {tuple(labels.shape)}), not batches: batch it, "
                f"e.g. dataset.batch(32) (the global batch), before fit")


def _standard_function(fn, inputs: ModelInputs, where: str):
    """A dataset function whose datasets give the model's own form (:func:`standard_dataset`
    on each dataset it makes)."""

    def standard_fn(context):
        return standard_dataset(fn(context), inputs, where)

    return standard_fn


def fit_data(x, y, *, sample_weight, class_weight, batch_size: int,
             steps_per_epoch: int | None, shuffle: bool, model, loss,
             where: str = "fit") -> TrainingData:
    """``fit``'s data as one of :mod:`ralp.training.data`'s forms, checked."""
    rule = LabelRule.of(loss, model)
    x, y = standard_data(x, y, model, where)
    if isinstance(x, tf.data.Dataset):
        return _dataset_data(x, y, sample_weight, class_weight, steps_per_epoch, model, rule,
                             where)
    if callable(x) and not isinstance(x, np.ndarray):
        return _function_data(x, y, sample_weight, class_weight, steps_per_epoch, model, rule,
                              where)
    if x is None or y is None:
        raise InvalidArgumentError(f"{where} needs images x and labels y, a tf.data.Dataset of "
                                   "(images, labels) batches, or a dataset function")
    if sample_weight is not None and class_weight is not None:
        raise InvalidArgumentError(f"{where}: give sample_weight or class_weight, not both")
    weights = None
    if sample_weight is not None:
        weights = np.asarray(sample_weight, np.float32)
        if weights.ndim != 1:
            raise TrainingSetupError(f"{where}: sample_weight holds one weight per image, got "
                                     f"shape {weights.shape}")
    _check_arrays(x, y, weights, model, rule, where)
    if class_weight is not None:
        weights = class_weights(class_weight, y, rule.classes)
    if len(y) < 1:
        raise InvalidArgumentError(f"{where}: no samples to train on")
    return ArrayData(x, y, weights, batch_size, shuffle, steps_per_epoch)


def _dataset_data(dataset, y, sample_weight, class_weight, steps, model, rule,
                  where) -> DatasetData:
    if y is not None or sample_weight is not None:
        raise InvalidArgumentError(f"{where}: with a dataset, the labels (and sample weights) "
                                   "come from its batches: leave y and sample_weight out")
    if class_weight is not None:
        dataset = dataset.map(class_weight_map(class_weight, rule.classes))
    spec = tuple(dataset.element_spec) if isinstance(dataset.element_spec, tuple) else (
        dataset.element_spec,)
    _check_spec(spec, model, rule, where)
    cardinality = int(dataset.cardinality())
    one_pass = steps is None
    if steps is None:
        if cardinality == tf.data.INFINITE_CARDINALITY:
            raise InvalidArgumentError(f"{where}: the dataset repeats forever: give "
                                       "steps_per_epoch")
        if cardinality == tf.data.UNKNOWN_CARDINALITY:
            raise InvalidArgumentError(
                f"{where}: the dataset's length is unknown (a filter, or a file-based source): "
                "give steps_per_epoch, or dataset.apply(tf.data.experimental."
                "assert_cardinality(batches))")
        if cardinality == 0:
            raise InvalidArgumentError(f"{where}: the dataset is empty")
        steps = cardinality
    first = next(iter(dataset.take(1)), None)
    if first is None:
        raise InvalidArgumentError(f"{where}: the dataset is empty")
    first = tuple(first)
    check_label_values(np.asarray(first[1]), rule, f"{where} (the dataset's first batch)")
    batch = _batch_size_of(spec) or int(np.shape(tf.nest.flatten(first[0])[0])[0])
    return DatasetData(dataset, steps, batch, one_pass)


def _function_data(fn, y, sample_weight, class_weight, steps, model, rule,
                   where) -> FunctionData:
    if y is not None or sample_weight is not None or class_weight is not None:
        raise InvalidArgumentError(f"{where}: with a dataset function, the labels and weights "
                                   "come from its batches: leave y, sample_weight and "
                                   "class_weight out (weigh samples in the function)")
    if steps is None:
        raise InvalidArgumentError(f"{where}: with a dataset function, give steps_per_epoch")
    context = Sharding(1, False).context(0)
    try:
        traced = tf.function(lambda: fn(context)).get_concrete_function()
    except TrainingSetupError:
        raise
    except Exception as e:  # the user's function: any error is theirs, said plainly
        raise TrainingSetupError(f"{where}: the dataset function failed when called with an "
                                 f"input context: {type(e).__name__}: {e}") from None
    dataset = traced.structured_outputs
    if not isinstance(dataset, tf.data.Dataset):
        raise InvalidTypeError(f"{where}: the dataset function returned "
                               f"{type(dataset).__name__}, not a tf.data.Dataset")
    spec = tuple(dataset.element_spec) if isinstance(dataset.element_spec, tuple) else (
        dataset.element_spec,)
    _check_spec(spec, model, rule, where)
    return FunctionData(fn, steps, spec)


def check_batch(batch_size, synchronous_workers: int, where: str = "fit") -> None:
    """A positive global batch that a synchronous step can split over its workers."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive integer, got {batch_size!r}")
    if batch_size < synchronous_workers:
        raise InvalidArgumentError(
            f"{where}: batch_size={batch_size} is the global batch, split over "
            f"{synchronous_workers} workers: give at least one sample per worker")


def keras_spec(spec: tf.TensorSpec) -> keras.KerasTensor:
    return keras.KerasTensor(tuple(spec.shape), dtype=spec.dtype.name)
