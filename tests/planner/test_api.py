"""``ralp.recommend`` with a calibration: every mode, the best, the skewness verdict."""

import warnings

import keras
import pytest

import ralp
from ralp.models import build_model
from ralp.planner import api
from ralp.planner.calibration import Calibration, Entry
from ralp.planner.model import Host
from tests.needs import needs_horovod


def test_recommend_uses_the_given_calibration():
    model = build_model("lenet", 10, 28)
    cal = Calibration(Host(False), [Entry("lenet", 4, 28, 10, None, 0.01, 0.002, 3)])
    rec = ralp.recommend(model, [4, 8], ["1gbit"], batch_size=4, calibration=cal)
    assert {p.mode for p in rec.predictions} == {"ps", "ralp-h", "ralp-n", "horovod", "stanza",
                                                  "collective"}
    assert [p.devices for p in rec.best()] == [4, 8]
    assert "S = " in rec.skewness_verdict
    # On a real cluster Horovod's step at N = 8 is one model step plus the ring: never less.
    hvd = next(p for p in rec.predictions if p.mode == "horovod" and p.devices == 8)
    assert hvd.step_time_s > 0.01


def own_model(name: str, extra=None) -> keras.Model:
    """A small classifier the zoo does not hold (so no helper can rebuild it by name)."""
    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    if extra is not None:
        x = extra(x)
    x = keras.layers.Dense(64, activation="relu", name="fc1")(x)
    return keras.Model(inputs, keras.layers.Dense(10, name="fc2")(x), name=name)




@pytest.mark.cluster
@needs_horovod
def test_a_users_own_model_gets_the_shared_hosts_whole_calibration():
    # its helper processes (capacity, Stanza's phases) load it from a .keras file saved here
    cal = ralp.calibrate(own_model("not_in_the_zoo"), 8, shared_host=True, steps=2)
    entry = cal.find("not_in_the_zoo", 8, 16, 10)
    assert [n for n, _ in entry.capacities] == [2, 4] and all(c > 0 for _, c in entry.capacities)
    conv, heads_s, tail_s = entry.stanza_beside
    assert conv == 3 and heads_s > 0 and tail_s > 0
    assert cal.host.shared and cal.host.capacities


class Unregistered(keras.layers.Layer):  # no get_config, not registered: cannot load back
    def call(self, x):
        return x * 1.0


def test_a_model_that_cannot_be_loaded_back_is_calibrated_without_helpers(monkeypatch):
    monkeypatch.setattr(api, "transfer_host", lambda shared, capacity=1.0: Host(shared))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = ralp.calibrate(own_model("odd", Unregistered()), 8, shared_host=True, steps=2)
    assert any("cannot be saved and loaded back" in str(w.message) for w in caught)
    entry = cal.find("odd", 8, 16, 10)
    assert entry.capacities is None and entry.stanza_beside is None and entry.full_s > 0
