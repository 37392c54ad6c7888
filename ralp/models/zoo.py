"""The zoo's table: each model's name, the benchmark's defaults, its smallest input, and where
its builder lives.

Nothing here imports Keras or TensorFlow (about 8 s on 2 cores), so a command checks a model
name or an image size at once, before it imports them; a builder's module is imported when a
model is first built. The smallest input sizes are derived in each builder's module, next to
the layers that set them, and ``tests/models/test_zoo.py`` builds every model at its minimum
and fails one pixel below it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ralp.models.registry import ModelSpec


@dataclass(frozen=True)
class LazyBuilder:
    """A zoo builder by name: ``module.function(num_classes, image_size, model_name,
    **keywords)``, imported at the first call."""

    module: str
    function: str
    keywords: tuple[tuple[str, object], ...] = ()

    def __call__(self, num_classes: int, image_size: int, model_name: str):
        build = getattr(importlib.import_module(self.module), self.function)
        return build(num_classes, image_size, model_name, **dict(self.keywords))


def _spec(name: str, module: str, function: str, image: int, batch: int, minimum: int,
          description: str, **keywords) -> ModelSpec:
    return ModelSpec(name, LazyBuilder(f"ralp.models.{module}", function,
                                       tuple(sorted(keywords.items()))),
                     image, batch, minimum, description)


VGG_CONV_COUNTS = {"vgg11": (1, 1, 2, 2, 2), "vgg16": (2, 2, 3, 3, 3), "vgg19": (2, 2, 4, 4, 4)}

ZOO_SPECS: tuple[ModelSpec, ...] = (
    _spec("alexnet", "alexnet", "build_alexnet", 224 + 3, 512, 67,
          "AlexNet (64-192-384-384-256 convs, FC 4096-4096), alexnet_model.py"),
    _spec("googlenet", "googlenet", "build_googlenet", 224, 32, 1,
          "GoogLeNet / Inception v1 without BN or aux heads, googlenet_model.py"),
    _spec("inception3", "inception", "build_inception3", 299, 32, 75,
          "Inception v3 (BN without scale, no aux head), inception_model.py"),
    _spec("lenet", "lenet", "build_lenet", 28, 32, 4,
          "LeNet-5 (conv 32/64 5x5, FC 512), lenet_model.py (Lenet5Model)"),
    _spec("overfeat", "overfeat", "build_overfeat", 231, 32, 71,
          "OverFeat fast model (convs 96-256-512-1024-1024, FC 3072-4096), overfeat_model.py"),
    _spec("resnet50", "resnet", "build_resnet50", 224, 64, 1,
          "ResNet-50 v1 (bottlenecks 3-4-6-3, stride on 1x1, no conv bias), resnet_model.py"),
    *(_spec(name, "vgg", "build_vgg", 224, 64, 32,
            f"VGG-{sum(counts) + 3} (convs per block {counts}), vgg_model.py",
            conv_counts=counts)
      for name, counts in VGG_CONV_COUNTS.items()),
)
