"""Registry of the benchmark model zoo.

Each zoo entry is a :class:`ModelSpec`: the builder that assembles the Keras model plus
the defaults the TensorFlow CNN benchmark (``tensorflow/benchmarks``,
``scripts/tf_cnn_benchmarks/models/``) gives the model in its constructor
(``CNNModel.__init__(model, image_size, batch_size, ...)``).

The registry is a plain dict filled by :mod:`ralp.models` when it is imported; nothing
is built at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ralp.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    import keras


class ModelBuilder(Protocol):
    """Builds one zoo model: ``builder(num_classes, image_size, model_name)``.

    Arguments are already validated by :func:`ralp.models.build_model`.
    """

    def __call__(self, num_classes: int, image_size: int, model_name: str) -> keras.Model: ...


@dataclass(frozen=True)
class ModelSpec:
    """One model of the zoo.

    Attributes:
        name: zoo name (the benchmark's ``--model`` name), also the Keras model name.
        builder: callable ``(num_classes, image_size, model_name) -> keras.Model``.
        default_image_size: square input side the benchmark uses by default.
        default_batch_size: per-device batch size the benchmark uses by default.
        min_image_size: smallest input side for which every layer keeps a spatial
            size >= 1 (and the final pooling still works).
        description: one line saying what the model is and what it mirrors.
    """

    name: str
    builder: ModelBuilder
    default_image_size: int
    default_batch_size: int
    min_image_size: int
    description: str


REGISTRY: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec) -> ModelSpec:
    """Adds ``spec`` to :data:`REGISTRY`; a name registered twice raises ``ValueError``."""
    if spec.name in REGISTRY:
        raise InvalidArgumentError(f"model {spec.name!r} is already registered")
    if not 1 <= spec.min_image_size <= spec.default_image_size:
        raise InvalidArgumentError(
            f"model {spec.name!r}: need 1 <= min_image_size ({spec.min_image_size}) "
            f"<= default_image_size ({spec.default_image_size})"
        )
    REGISTRY[spec.name] = spec
    return spec
