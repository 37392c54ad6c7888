"""Tests of the benchmark model zoo (:mod:`ralp.models`).

Architectures are checked against the TF CNN benchmark definitions
(``tensorflow/benchmarks`` ``scripts/tf_cnn_benchmarks/models/*.py``) and parameter totals
against published numbers, or, where the benchmark's variant differs from every
published model, against closed-form sums written out below.

Keras ``count_params`` counts every weight, including the non-trainable batch-norm
moving mean and variance; the formulas below do the same.

Speed: structure tests use each model at its (small) ``min_image_size``; each model is
built at its default size once, by the module-scoped ``default_model`` fixture.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import re
import subprocess
import sys
from collections.abc import Iterator

import keras
import pytest

from ralp.models import MODEL_NAMES, build_model, get_model_spec, register_model
from ralp.models.registry import REGISTRY, ModelSpec

pytestmark = pytest.mark.slow  # builds every zoo model at several sizes

# name: (default image size, default batch size, min image size), from the constructors
# CNNModel.__init__(model, image_size, batch_size, ...) in the benchmark sources.
DEFAULTS = {
    "alexnet": (227, 512, 67),  # AlexnetModel: 224 + 3, 512
    "googlenet": (224, 32, 1),  # GooglenetModel: 224, 32
    "inception3": (299, 32, 75),  # Inceptionv3Model: 299, 32
    "lenet": (28, 32, 4),  # Lenet5Model: 28, 32
    "overfeat": (231, 32, 71),  # OverfeatModel: 231, 32
    "resnet50": (224, 64, 1),  # ResnetModel: 224, default_batch_sizes['resnet50'] = 64
    "vgg11": (224, 64, 32),  # Vgg11Model: 224, 64
    "vgg16": (224, 64, 32),
    "vgg19": (224, 64, 32),
}

DENSE_LAYERS = {
    "alexnet": ("fc6", "fc7", "logits"),
    "googlenet": ("logits",),
    "inception3": ("logits",),
    "lenet": ("fc3", "logits"),
    "overfeat": ("fc6", "fc7", "logits"),
    "resnet50": ("logits",),
    "vgg11": ("fc6", "fc7", "logits"),
    "vgg16": ("fc6", "fc7", "logits"),
    "vgg19": ("fc6", "fc7", "logits"),
}

# Width of the benchmark's cnn.reshape([-1, N]) before the first affine layer.
FLAT_WIDTH = {
    "alexnet": 256 * 6 * 6,
    "googlenet": 1024,
    "inception3": 2048,
    "lenet": 64 * 7 * 7,
    "overfeat": 1024 * 6 * 6,
    "resnet50": 2048,
    "vgg11": 512 * 7 * 7,
    "vgg16": 512 * 7 * 7,
    "vgg19": 512 * 7 * 7,
}


# --------------------------------------------------------------------------- formulas


def conv_p(kh: int, kw: int, cin: int, cout: int, *, bias: bool = True) -> int:
    return kh * kw * cin * cout + (cout if bias else 0)


def dense_p(fan_in: int, units: int) -> int:
    return fan_in * units + units


def alexnet_total(filters: tuple[int, ...], num_classes: int = 1000) -> int:
    c1, c2, c3, c4, c5 = filters
    convs = (
        conv_p(11, 11, 3, c1)
        + conv_p(5, 5, c1, c2)
        + conv_p(3, 3, c2, c3)
        + conv_p(3, 3, c3, c4)
        + conv_p(3, 3, c4, c5)
    )
    return convs + dense_p(c5 * 6 * 6, 4096) + dense_p(4096, 4096) + dense_p(4096, num_classes)


def overfeat_total(num_classes: int = 1000) -> int:
    convs = (
        conv_p(11, 11, 3, 96)
        + conv_p(5, 5, 96, 256)
        + conv_p(3, 3, 256, 512)
        + conv_p(3, 3, 512, 1024)
        + conv_p(3, 3, 1024, 1024)
    )
    fcs = dense_p(1024 * 6 * 6, 3072) + dense_p(3072, 4096) + dense_p(4096, num_classes)
    return convs + fcs


def lenet_total(channels: int = 3, num_classes: int = 1000) -> int:
    return (
        conv_p(5, 5, channels, 32)
        + conv_p(5, 5, 32, 64)
        + dense_p(64 * 7 * 7, 512)
        + dense_p(512, num_classes)
    )


GOOGLENET_MODULES = (
    (64, 96, 128, 16, 32, 32),
    (128, 128, 192, 32, 96, 64),
    (192, 96, 208, 16, 48, 64),
    (160, 112, 224, 24, 64, 64),
    (128, 128, 256, 24, 64, 64),
    (112, 144, 288, 32, 64, 64),
    (256, 160, 320, 32, 128, 128),
    (256, 160, 320, 32, 128, 128),
    (384, 192, 384, 48, 128, 128),
)


def googlenet_total(*, k5: int, bias: bool, bn_per_channel: int, num_classes: int = 1000) -> int:
    def c(k: int, cin: int, cout: int) -> int:
        return conv_p(k, k, cin, cout, bias=bias) + bn_per_channel * cout

    total = c(7, 3, 64) + c(1, 64, 64) + c(3, 64, 192)
    cin = 192
    for n1, r3, n3, r5, n5, pp in GOOGLENET_MODULES:
        total += c(1, cin, n1) + c(1, cin, r3) + c(3, r3, n3)
        total += c(1, cin, r5) + c(k5, r5, n5) + c(1, cin, pp)
        cin = n1 + n3 + n5 + pp
    return total + dense_p(cin, num_classes)


def resnet50_total(*, conv_bias: bool, bn_per_channel: int, num_classes: int = 1000) -> int:
    def c(k: int, cin: int, cout: int) -> int:
        return conv_p(k, k, cin, cout, bias=conv_bias) + bn_per_channel * cout

    total = c(7, 3, 64)
    cin = 64
    for depth, bottleneck, blocks in ((256, 64, 3), (512, 128, 4), (1024, 256, 6), (2048, 512, 3)):
        for _ in range(blocks):
            if cin != depth:
                total += c(1, cin, depth)  # projection shortcut
            total += c(1, cin, bottleneck) + c(3, bottleneck, bottleneck) + c(1, bottleneck, depth)
            cin = depth
    return total + dense_p(2048, num_classes)


# Totals with 1000 classes at the default image size.
EXPECTED_TOTAL = {
    # Benchmark AlexNet has conv4 = 384 filters (torchvision/"one weird trick": 256), so
    # it is torchvision's published 61,100,840 plus the wider conv4/conv5 fan-in.
    "alexnet": alexnet_total((64, 192, 384, 384, 256)),
    # Benchmark GoogLeNet: conv bias, no BN, true 5x5 kernels, no aux heads. Published
    # torchvision 6,624,904 uses BN (no bias) and 3x3 in the "5x5" column.
    "googlenet": googlenet_total(k5=5, bias=True, bn_per_channel=0),
    # Same architecture as keras.applications.InceptionV3 (BN scale=False, no conv bias,
    # no aux head): published total 23,851,784.
    "inception3": 23_851_784,
    # Matches TF's MNIST tutorial layout but with the benchmark's 3 input channels.
    "lenet": lenet_total(),
    # No published total for the benchmark's OverFeat-fast variant: closed form only.
    "overfeat": overfeat_total(),
    # No conv bias, BN with scale (gamma, beta, moving mean, moving var = 4 per channel).
    # Keras ResNet50 (published 25,636,712) has the same layers plus conv biases.
    "resnet50": resnet50_total(conv_bias=False, bn_per_channel=4),
    # Published VGG-A/D/E totals (Keras VGG16/VGG19, torchvision vgg11).
    "vgg11": 132_863_336,
    "vgg16": 138_357_544,
    "vgg19": 143_667_240,
}


def test_formulas_reproduce_published_totals() -> None:
    # The same closed forms with the published models' choices give their totals, so the
    # benchmark-variant numbers above are anchored to published ones.
    assert alexnet_total((64, 192, 384, 256, 256)) == 61_100_840  # torchvision AlexNet
    assert googlenet_total(k5=3, bias=False, bn_per_channel=2) == 6_624_904  # torchvision
    assert resnet50_total(conv_bias=True, bn_per_channel=4) == 25_636_712  # Keras ResNet50
    assert EXPECTED_TOTAL["alexnet"] - 61_100_840 == 3 * 3 * 384 * 128 + 128 + 3 * 3 * 128 * 256
    assert 25_636_712 - EXPECTED_TOTAL["resnet50"] == 26_560  # sum of the conv biases


# --------------------------------------------------------------------------- fixtures


def _release() -> None:
    keras.backend.clear_session()
    gc.collect()


@pytest.fixture(scope="module")
def min_models() -> Iterator[dict[str, keras.Model]]:
    """Each model at its min_image_size with 1000 classes, built lazily and cached."""

    class _Cache(dict):
        def __missing__(self, name: str) -> keras.Model:
            model = build_model(name, image_size=get_model_spec(name).min_image_size)
            self[name] = model
            return model

    cache = _Cache()
    yield cache
    cache.clear()
    _release()


@pytest.fixture(scope="module", params=MODEL_NAMES)
def default_model(request: pytest.FixtureRequest) -> Iterator[tuple[str, keras.Model]]:
    """Each model at its default size, built once (pytest groups the tests per param)."""
    name = request.param
    model = build_model(name)
    yield name, model
    del model
    _release()


def layers_of(model: keras.Model, cls: type) -> list[keras.layers.Layer]:
    return [layer for layer in model.layers if isinstance(layer, cls)]


def conv_cfg(layer: keras.layers.Conv2D) -> tuple:
    cfg = layer.get_config()
    return (
        layer.filters,
        tuple(layer.kernel_size),
        tuple(layer.strides),
        layer.padding,
        layer.use_bias,
        cfg["activation"],
    )


# --------------------------------------------------------------------------- registry


def test_model_names_sorted_tuple() -> None:
    assert isinstance(MODEL_NAMES, tuple)
    assert tuple(sorted(DEFAULTS)) == MODEL_NAMES
    assert set(REGISTRY) == set(MODEL_NAMES)


def test_the_zoos_names_and_sizes_need_no_tensorflow() -> None:
    # A fresh interpreter: this one imported TensorFlow long ago.
    code = ("import sys; from ralp.models import MODEL_NAMES, get_model_spec; "
            "sizes = [get_model_spec(m).min_image_size for m in MODEL_NAMES]; "
            "print(len(sizes), 'tensorflow' in sys.modules, 'keras' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [str(len(MODEL_NAMES)), "False", "False"]


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(ValueError) as info:
        get_model_spec("resnet51")
    for name in MODEL_NAMES:
        assert name in str(info.value)
    with pytest.raises(ValueError):
        build_model("resnet50_v1.5")


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_spec_defaults(name: str) -> None:
    spec = get_model_spec(name)
    assert isinstance(spec, ModelSpec)
    assert spec.name == name
    assert (spec.default_image_size, spec.default_batch_size, spec.min_image_size) == (
        DEFAULTS[name]
    )
    assert spec.description


def test_spec_is_frozen_and_register_rejects_duplicates() -> None:
    spec = get_model_spec("lenet")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "x"  # type: ignore[misc]
    with pytest.raises(ValueError, match="already registered"):
        register_model(spec)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_too_small_image_size_raises(name: str) -> None:
    minimum = get_model_spec(name).min_image_size
    with pytest.raises(ValueError, match=rf"minimum is {minimum}\b"):
        build_model(name, image_size=minimum - 1)


def test_bad_num_classes() -> None:
    with pytest.raises(ValueError, match="minimum is 1"):
        build_model("lenet", num_classes=0)
    with pytest.raises(TypeError):
        build_model("lenet", num_classes=10.0)  # type: ignore[arg-type]


def test_default_image_size_and_name_prefix() -> None:
    model = build_model("lenet", num_classes=10, name_prefix="worker0_")
    assert model.name == "worker0_lenet"
    assert tuple(model.input.shape) == (None, 28, 28, 3)
    assert build_model("lenet", image_size=8).name == "lenet"


# --------------------------------------------------------------------------- min sizes


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_builds_at_min_image_size(name: str, min_models: dict[str, keras.Model]) -> None:
    model = min_models[name]
    size = get_model_spec(name).min_image_size
    assert model.name == name
    assert tuple(model.input.shape) == (None, size, size, 3)
    assert tuple(model.output.shape) == (None, 1000)


@pytest.mark.parametrize("name", [n for n in sorted(DEFAULTS) if DEFAULTS[n][2] > 1])
def test_min_image_size_is_tight(name: str) -> None:
    # One pixel less and some VALID conv/pool would produce an empty map: Keras refuses.
    spec = get_model_spec(name)
    with pytest.raises(ValueError, match="zero or negative"):
        spec.builder(1000, spec.min_image_size - 1, name)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_more_classes_only_widen_logits(name: str, min_models: dict[str, keras.Model]) -> None:
    small = min_models[name]
    big = build_model(name, num_classes=21841, image_size=get_model_spec(name).min_image_size)
    assert tuple(big.output.shape) == (None, 21841)
    per_layer_small = {layer.name: layer.count_params() for layer in small.layers}
    per_layer_big = {layer.name: layer.count_params() for layer in big.layers}
    assert per_layer_small.keys() == per_layer_big.keys()
    changed = {n for n in per_layer_small if per_layer_small[n] != per_layer_big[n]}
    assert changed == {"logits"}
    fan_in = int(small.get_layer("logits").kernel.shape[0])
    assert big.count_params() - small.count_params() == (21841 - 1000) * (fan_in + 1)


# --------------------------------------------------------------------------- default size


def test_default_model(default_model: tuple[str, keras.Model]) -> None:
    name, model = default_model
    size = DEFAULTS[name][0]
    assert model.name == name
    assert tuple(model.input.shape) == (None, size, size, 3)
    assert tuple(model.output.shape) == (None, 1000)
    assert model.count_params() == EXPECTED_TOTAL[name]
    # The flatten before the classifier has the benchmark's reshape width.
    flatten = model.get_layer("flatten")
    assert isinstance(flatten, keras.layers.Flatten)
    assert tuple(flatten.output.shape) == (None, FLAT_WIDTH[name])
    # googlenet / inception3: the benchmark's fixed final window fits the map exactly.
    final_pool = {"googlenet": ("pool5", 7), "inception3": ("avg_pool", 8)}.get(name)
    if final_pool is not None:
        pool = model.get_layer(final_pool[0])
        window = (final_pool[1], final_pool[1])
        assert tuple(pool.pool_size) == window
        assert tuple(pool.input.shape[1:3]) == window


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_classifier_head(name: str, min_models: dict[str, keras.Model]) -> None:
    model = min_models[name]
    dense = layers_of(model, keras.layers.Dense)
    assert tuple(layer.name for layer in dense) == DENSE_LAYERS[name]
    assert model.layers[-1].name == "logits"
    for layer in dense:
        expected = "linear" if layer.name == "logits" else "relu"
        assert layer.get_config()["activation"] == expected
        # cnn.affine: truncated normal, stddev sqrt(2 / fan_in) (relu) or sqrt(1 / fan_in).
        fan_in = int(layer.kernel.shape[0])
        init = layer.kernel_initializer
        assert isinstance(init, keras.initializers.TruncatedNormal)
        factor = 1.0 if layer.name == "logits" else 2.0
        assert init.stddev == pytest.approx(math.sqrt(factor / fan_in))
    # The first Dense reads the Flatten named "flatten".
    assert dense[0].input is model.get_layer("flatten").output
    dropouts = layers_of(model, keras.layers.Dropout)
    with_dropout = name in ("alexnet", "overfeat", "vgg11", "vgg16", "vgg19")
    assert [d.name for d in dropouts] == (["drop6", "drop7"] if with_dropout else [])
    assert all(d.rate == 0.5 for d in dropouts)  # keep_prob 0.5


def _chain(model: keras.Model) -> list[str]:
    return [layer.name for layer in model.layers]


ALEXNET_LIKE = {  # conv configs, pool (size, stride, padding), dense widths
    "alexnet": (
        [(64, (11, 11), (4, 4), "valid", True, "relu"), (192, (5, 5), (1, 1), "same", True, "relu"),
         (384, (3, 3), (1, 1), "same", True, "relu"), (384, (3, 3), (1, 1), "same", True, "relu"),
         (256, (3, 3), (1, 1), "same", True, "relu")],
        ((3, 3), (2, 2), "valid"),
        [4096, 4096, 1000],
    ),
    "overfeat": (
        [(96, (11, 11), (4, 4), "valid", True, "relu"), (256, (5, 5), (1, 1), "valid", True, "relu"),
         (512, (3, 3), (1, 1), "same", True, "relu"), (1024, (3, 3), (1, 1), "same", True, "relu"),
         (1024, (3, 3), (1, 1), "same", True, "relu")],
        ((2, 2), (2, 2), "valid"),
        [3072, 4096, 1000],
    ),
}


@pytest.mark.parametrize("name", sorted(ALEXNET_LIKE))
def test_alexnet_and_overfeat_layers(min_models: dict[str, keras.Model], name: str) -> None:
    model = min_models[name]
    convs, pool, dense = ALEXNET_LIKE[name]
    assert _chain(model) == [
        "images", "conv1", "pool1", "conv2", "pool2", "conv3", "conv4", "conv5", "pool5",
        "flatten", "fc6", "drop6", "fc7", "drop7", "logits",
    ]
    assert [conv_cfg(layer) for layer in layers_of(model, keras.layers.Conv2D)] == convs
    for p in layers_of(model, keras.layers.MaxPooling2D):
        assert (tuple(p.pool_size), tuple(p.strides), p.padding) == pool
    assert [d.units for d in layers_of(model, keras.layers.Dense)] == dense


def test_lenet_layers(min_models: dict[str, keras.Model]) -> None:
    model = min_models["lenet"]
    assert _chain(model) == [
        "images", "conv1", "pool1", "conv2", "pool2", "flatten", "fc3", "logits",
    ]
    convs = [conv_cfg(layer) for layer in layers_of(model, keras.layers.Conv2D)]
    assert convs == [
        (32, (5, 5), (1, 1), "same", True, "relu"),
        (64, (5, 5), (1, 1), "same", True, "relu"),
    ]
    assert [d.units for d in layers_of(model, keras.layers.Dense)] == [512, 1000]
    # cnn.conv's tf.variance_scaling_initializer(): scale 1, fan_in, truncated normal.
    init = model.get_layer("conv1").kernel_initializer
    assert isinstance(init, keras.initializers.VarianceScaling)
    assert (init.scale, init.mode, init.distribution) == (1.0, "fan_in", "truncated_normal")


@pytest.mark.parametrize(("name", "counts"), [
    ("vgg11", (1, 1, 2, 2, 2)), ("vgg16", (2, 2, 3, 3, 3)), ("vgg19", (2, 2, 4, 4, 4)),
])
def test_vgg_layers(name: str, counts: tuple[int, ...], min_models: dict[str, keras.Model]) -> None:
    model = min_models[name]
    expected = []
    for block, (filters, count) in enumerate(zip((64, 128, 256, 512, 512), counts, strict=True)):
        expected += [f"conv{block + 1}_{i + 1}" for i in range(count)] + [f"pool{block + 1}"]
        for i in range(count):
            conv = model.get_layer(f"conv{block + 1}_{i + 1}")
            assert conv_cfg(conv) == (filters, (3, 3), (1, 1), "same", True, "relu")
        pool = model.get_layer(f"pool{block + 1}")
        assert (tuple(pool.pool_size), tuple(pool.strides), pool.padding) == (
            (2, 2),
            (2, 2),
            "valid",
        )
    tail = ["flatten", "fc6", "drop6", "fc7", "drop7", "logits"]
    assert _chain(model) == ["images", *expected, *tail]
    assert [d.units for d in layers_of(model, keras.layers.Dense)] == [4096, 4096, 1000]


def test_googlenet_layers(min_models: dict[str, keras.Model]) -> None:
    model = min_models["googlenet"]
    convs = layers_of(model, keras.layers.Conv2D)
    assert len(convs) == 3 + 9 * 6
    assert all(c.use_bias and c.get_config()["activation"] == "relu" for c in convs)
    assert not layers_of(model, keras.layers.BatchNormalization)
    assert conv_cfg(model.get_layer("conv1")) == (64, (7, 7), (2, 2), "same", True, "relu")
    assert conv_cfg(model.get_layer("conv2_reduce"))[:2] == (64, (1, 1))
    assert conv_cfg(model.get_layer("conv2"))[:2] == (192, (3, 3))
    for pool in ("pool1", "pool2", "pool3", "pool4"):
        layer = model.get_layer(pool)
        assert isinstance(layer, keras.layers.MaxPooling2D)
        assert (tuple(layer.pool_size), tuple(layer.strides), layer.padding) == (
            (3, 3),
            (2, 2),
            "same",
        )
    widths = {"3a": 256, "3b": 480, "4a": 512, "4b": 512, "4c": 512, "4d": 528, "4e": 832}
    widths |= {"5a": 832, "5b": 1024}
    for module, width in widths.items():
        assert model.get_layer(f"inception_{module}_concat").output.shape[-1] == width
        assert model.get_layer(f"inception_{module}_branch5x5_conv").kernel_size == (5, 5)
        pool = model.get_layer(f"inception_{module}_pool")
        assert isinstance(pool, keras.layers.MaxPooling2D)
        assert (tuple(pool.strides), pool.padding) == ((1, 1), "same")
    assert isinstance(model.get_layer("pool5"), keras.layers.AveragePooling2D)


def _assert_bn_model(model: keras.Model, *, momentum: float, epsilon: float, scale: bool) -> None:
    convs = layers_of(model, keras.layers.Conv2D)
    bns = layers_of(model, keras.layers.BatchNormalization)
    assert len(convs) == len(bns)
    assert not any(c.use_bias for c in convs)  # batch norm on -> no conv bias
    for bn in bns:
        assert (bn.momentum, bn.epsilon, bn.center, bn.scale) == (momentum, epsilon, True, scale)


def test_inception3_layers(min_models: dict[str, keras.Model]) -> None:
    model = min_models["inception3"]
    assert len(layers_of(model, keras.layers.Conv2D)) == 94
    # cnn.use_batch_norm = True with the builder defaults: decay .999, eps 1e-3, no scale.
    _assert_bn_model(model, momentum=0.999, epsilon=1e-3, scale=False)
    stem = [
        ("conv_1a_3x3", (32, (3, 3), (2, 2), "valid")),
        ("conv_2a_3x3", (32, (3, 3), (1, 1), "valid")),
        ("conv_2b_3x3", (64, (3, 3), (1, 1), "same")),
        ("conv_3b_1x1", (80, (1, 1), (1, 1), "valid")),
        ("conv_4a_3x3", (192, (3, 3), (1, 1), "valid")),
    ]
    for base, cfg in stem:
        assert conv_cfg(model.get_layer(f"{base}_conv"))[:4] == cfg
        assert model.get_layer(f"{base}_relu").get_config()["activation"] == "relu"
    widths = {"mixed_5b": 256, "mixed_5c": 288, "mixed_5d": 288, "mixed_6a": 768}
    widths |= {f"mixed_6{m}": 768 for m in "bcde"}
    widths |= {"mixed_7a": 1280, "mixed_7b": 2048, "mixed_7c": 2048}
    for module, width in widths.items():
        assert model.get_layer(module).output.shape[-1] == width
    assert model.get_layer("mixed_6b_branch7x7_2_conv").kernel_size == (1, 7)
    assert model.get_layer("mixed_6b_branch7x7_3_conv").kernel_size == (7, 1)
    assert isinstance(model.get_layer("mixed_7b_pool"), keras.layers.AveragePooling2D)
    assert isinstance(model.get_layer("mixed_7c_pool"), keras.layers.MaxPooling2D)
    assert len(model.get_layer("mixed_7c").input) == 6  # 'share' columns: six outputs
    # Default Inceptionv3Model(auxiliary=False): no auxiliary head, a single output.
    assert len(model.outputs) == 1
    assert not [layer.name for layer in model.layers if "aux" in layer.name]


def test_resnet50_layers(min_models: dict[str, keras.Model]) -> None:
    model = min_models["resnet50"]
    _assert_bn_model(model, momentum=0.9, epsilon=1e-5, scale=True)
    assert len(layers_of(model, keras.layers.Conv2D)) == 1 + 16 * 3 + 4
    assert model.get_layer("conv1_pad").padding == ((3, 3), (3, 3))
    assert conv_cfg(model.get_layer("conv1"))[:4] == (64, (7, 7), (2, 2), "valid")
    pool1 = model.get_layer("pool1")
    assert (tuple(pool1.pool_size), tuple(pool1.strides), pool1.padding) == (
        (3, 3),
        (2, 2),
        "same",
    )
    blocks: dict[int, int] = {}
    for layer in model.layers:
        match = re.fullmatch(r"stage(\d)_block(\d+)_add", layer.name)
        if match:
            blocks[int(match[1])] = max(blocks.get(int(match[1]), 0), int(match[2]))
    assert blocks == {2: 3, 3: 4, 4: 6, 5: 3}
    names = {layer.name for layer in model.layers}
    widths = ((256, 64), (512, 128), (1024, 256), (2048, 512))
    for stage, (depth, bottleneck) in enumerate(widths, start=2):
        for block in range(1, blocks[stage] + 1):
            pre = f"stage{stage}_block{block}"
            stride = 2 if block == 1 and stage > 2 else 1
            # v1 (not v1.5): the stride is on the first 1x1 conv, the 3x3 has stride 1.
            assert conv_cfg(model.get_layer(f"{pre}_conv1"))[:3] == (
                bottleneck,
                (1, 1),
                (stride, stride),
            )
            assert conv_cfg(model.get_layer(f"{pre}_conv2"))[:4] == (
                bottleneck,
                (3, 3),
                (1, 1),
                "same",
            )
            assert conv_cfg(model.get_layer(f"{pre}_conv3"))[:2] == (depth, (1, 1))
            assert {f"{pre}_relu1", f"{pre}_relu2", f"{pre}_relu"} <= names
            assert f"{pre}_relu3" not in names  # conv3: activation=None before the add
            has_projection = f"{pre}_shortcut_conv" in names
            assert has_projection == (block == 1)
            if has_projection:
                assert conv_cfg(model.get_layer(f"{pre}_shortcut_conv"))[:3] == (
                    depth,
                    (1, 1),
                    (stride, stride),
                )
                assert f"{pre}_shortcut_bn" in names
    assert isinstance(model.get_layer("avg_pool"), keras.layers.GlobalAveragePooling2D)


# --------------------------------------------------------------------------- final pool


def test_final_pool_clipped_to_small_maps(min_models: dict[str, keras.Model]) -> None:
    for name, pool_name in (("googlenet", "pool5"), ("inception3", "avg_pool")):
        pool = min_models[name].get_layer(pool_name)
        assert tuple(pool.input.shape[1:3]) == (1, 1)
        assert tuple(pool.pool_size) == (1, 1)
    model = build_model("inception3", image_size=200)  # 4x4 map before the 8x8 pool
    pool = model.get_layer("avg_pool")
    assert tuple(pool.pool_size) == (4, 4)
    assert tuple(pool.output.shape) == (None, 1, 1, 2048)


def test_final_pool_keeps_benchmark_window_on_large_maps() -> None:
    model = build_model("googlenet", num_classes=10, image_size=256)  # 8x8 map
    pool = model.get_layer("pool5")
    assert tuple(pool.pool_size) == (7, 7)
    assert tuple(pool.output.shape) == (None, 2, 2, 1024)
    assert tuple(model.get_layer("flatten").output.shape) == (None, 4 * 1024)
