"""The lab's calibrations of the simulated cluster (:mod:`lab.planner.probes`): a user's own
model on the shared host, its helper processes loading it from a saved file."""

import warnings

import keras
import pytest

from lab.planner import probes
from lab.planner.host import Host
from tests.needs import needs_horovod


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
    cal = probes.calibrate_host(own_model("not_in_the_zoo"), 8, shared_host=True, steps=2)
    entry = cal.find("not_in_the_zoo", 8, 16, 10)
    assert [n for n, _ in entry.capacities] == [2, 4] and all(c > 0 for _, c in entry.capacities)
    conv, heads_s, tail_s = entry.stanza_beside
    assert conv == 3 and heads_s > 0 and tail_s > 0
    assert cal.host.shared and cal.host.capacities


class Unregistered(keras.layers.Layer):  # no get_config, not registered: cannot load back
    def call(self, x):
        return x * 1.0


def test_a_model_that_cannot_be_loaded_back_is_calibrated_without_helpers(monkeypatch):
    monkeypatch.setattr(probes, "transfer_host", lambda shared, capacity=1.0: Host(shared))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = probes.calibrate_host(own_model("odd", Unregistered()), 8, shared_host=True,
                                    steps=2)
    assert any("cannot be saved and loaded back" in str(w.message) for w in caught)
    entry = cal.find("odd", 8, 16, 10)
    assert entry.capacities is None and entry.stanza_beside is None and entry.full_s > 0
