"""The decision for the nine zoo models at their benchmark defaults."""

import gc

import keras
import pytest

import ralp
from ralp.models import MODEL_NAMES

FC_HEAVY = ("alexnet", "overfeat", "vgg11", "vgg16", "vgg19")


@pytest.fixture(scope="module", params=MODEL_NAMES)
def zoo_profile(request):
    name = request.param
    model = ralp.build_model(name)
    p = ralp.profile(model, ralp.get_model_spec(name).default_batch_size)
    yield name, model, p
    del model
    keras.backend.clear_session()
    gc.collect()


def test_decision(zoo_profile):
    name, model, p = zoo_profile
    dense = [layer.name for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    assert p.params_total == model.count_params()
    if name == "lenet":
        # LeNet's 1000-class logits layer (513K params) sits after the 1.6M-param fc3: the
        # mass leans right of its mean, so S > 0 (with 10 classes it is < 0, see below).
        assert p.skewness > 0 and not p.eligible and p.offloaded_layers == []
        return
    assert p.skewness < -0.5 and p.eligible
    # Everything after the split is the classifier: the flatten, the FC layers, dropout.
    assert set(dense) <= set(p.offloaded_layers)
    assert all(p.table.row(n).kind in ("fc", "other") for n in p.offloaded_layers)
    assert p.offloaded_layers[0] == "flatten"
    assert p.bytes_per_step["ralp"].total < p.bytes_per_step["ps"].total
    if name in FC_HEAVY:
        assert p.split_after == "pool5"
        assert p.offloaded_params / p.params_total > 0.85
        assert p.bytes_per_step["ralp"].total < 0.2 * p.bytes_per_step["ps"].total


def test_the_verdict_warns_where_horovod_loads_the_busiest_link_less(zoo_profile):
    name, _, p = zoo_profile
    link = p.busiest_link_bytes
    if not p.eligible:
        return
    # FC-heavy models: RALP's PS link carries far less than Horovod's worker links; the
    # FC-light ones (2 to 15% offloaded) keep almost every byte on one PS link.
    assert (link["ralp"] < link["horovod"]) == (name in FC_HEAVY)
    assert ("Caution: Horovod" in p.verdict) == (name not in FC_HEAVY), p.verdict
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
