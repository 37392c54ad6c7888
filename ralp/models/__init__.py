"""The benchmark model zoo: Keras 3 functional (NHWC) versions of the TF CNN benchmarks.

Each model mirrors, layer for layer, its definition in ``tensorflow/benchmarks``
``scripts/tf_cnn_benchmarks/models/`` (see each module's docstring), including the final
linear ``logits`` layer that ``CNNModel.build_network`` adds; the softmax of the loss is
applied outside the model. Models are only built here, never run.

>>> from ralp.models import build_model
>>> model = build_model("vgg16", num_classes=10, image_size=32)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ralp.errors import InvalidArgumentError, InvalidTypeError
from ralp.models.registry import REGISTRY, ModelSpec, register_model
from ralp.models.zoo import ZOO_SPECS

if TYPE_CHECKING:  # pragma: no cover - Keras is imported by a builder, when it builds
    import keras

__all__ = ["MODEL_NAMES", "ModelSpec", "build_model", "get_model_spec", "register_model"]

for _spec in ZOO_SPECS:  # the table needs no Keras: names and sizes are checked at once
    register_model(_spec)
del _spec

MODEL_NAMES: tuple[str, ...] = tuple(sorted(REGISTRY))


def get_model_spec(name: str) -> ModelSpec:
    """The :class:`ModelSpec` registered as ``name``; unknown names raise ``ValueError``."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        valid = ", ".join(sorted(REGISTRY))
        raise InvalidArgumentError(f"unknown model {name!r}; valid names: {valid}") from None


def build_model(
    name: str,
    num_classes: int = 1000,
    image_size: int | None = None,
    *,
    name_prefix: str | None = None,
) -> keras.Model:
    """Builds the zoo model ``name`` for ``image_size`` x ``image_size`` x 3 inputs.

    Args:
        name: one of :data:`MODEL_NAMES`, or the path of a model saved as ``.keras`` (a
            user's own model; loaded uncompiled, its classes and input side must match).
        num_classes: width of the final linear ``logits`` layer (>= 1).
        image_size: input side; ``None`` means the model's benchmark default. Must be at
            least the model's ``min_image_size``.
        name_prefix: prepended to the Keras model name (layer names stay unprefixed, so
            name-based placement rules apply to every copy).

    Raises:
        ValueError: unknown name, ``num_classes < 1``, or an image size below the minimum.
    """
    from ralp.models.model_file import build_from_file, is_model_file

    if is_model_file(name):
        return build_from_file(name, num_classes, image_size)
    spec = get_model_spec(name)
    if isinstance(num_classes, bool) or not isinstance(num_classes, int):
        raise InvalidTypeError(f"num_classes must be an int, got {num_classes!r}")
    if num_classes < 1:
        raise InvalidArgumentError(f"num_classes must be >= 1 (the minimum is 1), got {num_classes}")
    if image_size is None:
        image_size = spec.default_image_size
    if isinstance(image_size, bool) or not isinstance(image_size, int):
        raise InvalidTypeError(f"image_size must be an int or None, got {image_size!r}")
    if image_size < spec.min_image_size:
        raise InvalidArgumentError(
            f"image_size {image_size} is too small for {name!r}: "
            f"the minimum is {spec.min_image_size}"
        )
    model_name = f"{name_prefix}{name}" if name_prefix else name
    return spec.builder(num_classes, image_size, model_name)
