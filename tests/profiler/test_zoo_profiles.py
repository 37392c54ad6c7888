"""The decision for the nine zoo models at their benchmark defaults, and the paper's statements."""

import gc

import keras
import pytest

import ralp
from ralp.models import MODEL_NAMES
from ralp.profiler.skewness import is_eligible

pytestmark = pytest.mark.slow  # profiles every zoo model at its benchmark size

FC_HEAVY = ("alexnet", "overfeat", "vgg11", "vgg16", "vgg19")
PAPER_MODELS = ("alexnet", "googlenet", "inception3", "lenet", "overfeat", "resnet50", "vgg11",
                "vgg19")


@pytest.fixture(scope="module")
def zoo():
    """name -> (profile, Dense layer names, Keras' parameter count), every model built once."""
    profiles = {}
    for name in MODEL_NAMES:
        model = ralp.build_model(name)
        p = ralp.profile(model, ralp.get_model_spec(name).default_batch_size)
        dense = [layer.name for layer in model.layers if isinstance(layer, keras.layers.Dense)]
        profiles[name] = (p, dense, model.count_params())
        del model
        keras.backend.clear_session()
        gc.collect()
    return profiles


def test_the_papers_selection_statements(zoo):
    """RALP's profiler (Park et al. 2019): with K = -0.5 all eight benchmark models are
    eligible; with K = -1.5 exactly
    alexnet, overfeat, vgg11 and vgg19 are."""
    skew = {name: zoo[name][0].skewness for name in PAPER_MODELS}
    assert {n for n, s in skew.items() if is_eligible(s, -0.5)} == set(PAPER_MODELS), skew
    strict = {n for n, s in skew.items() if is_eligible(s, -1.5)}
    assert strict == {"alexnet", "overfeat", "vgg11", "vgg19"}, skew


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_decision(zoo, name):
    p, dense, count = zoo[name]
    assert p.params_total == count
    assert p.skewness < -0.5 and p.eligible
    # Everything after the split is the classifier: the flatten, the FC layers, dropout.
    assert set(dense) <= set(p.offloaded_layers)
    assert all(p.table.row(n).kind in ("fc", "other") for n in p.offloaded_layers)
    assert p.offloaded_layers[0] == "flatten"
    assert p.bytes_per_step["ralp"].total < p.bytes_per_step["ps"].total
    if name in FC_HEAVY:
        assert p.split_after == "pool5"
    if name in (*FC_HEAVY, "lenet"):
        assert p.offloaded_params / p.params_total > 0.85
        assert p.bytes_per_step["ralp"].total < 0.2 * p.bytes_per_step["ps"].total


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_the_verdict_warns_where_horovod_loads_the_busiest_link_less(zoo, name):
    p = zoo[name][0]
    link = p.busiest_link_bytes
    # FC-heavy models: RALP's PS link carries far less than Horovod's worker links; the
    # FC-light ones (2 to 15% offloaded) keep almost every byte on one PS link.
    fc_heavy = name in (*FC_HEAVY, "lenet")
    assert (link["ralp"] < link["horovod"]) == fc_heavy
    assert ("Caution: Horovod" in p.verdict) == (not fc_heavy), p.verdict
    assert link["ralp"] < link["ps"]


def test_lenet_with_ten_classes_is_left_skewed():
    p = ralp.profile(ralp.build_model("lenet", num_classes=10), 32)
    assert p.skewness < -0.5 and p.eligible and p.split_after == "pool2"


def test_imagenet_22k_makes_the_split_pay_off_more():
    small = ralp.profile(ralp.build_model("resnet50", image_size=32), 64)
    big = ralp.profile(ralp.build_model("resnet50", image_size=32, num_classes=21841), 64)
    assert big.skewness < small.skewness
    ratio = lambda p: p.bytes_per_step["ralp"].total / p.bytes_per_step["ps"].total  # noqa: E731
    assert ratio(big) < ratio(small)
