"""``ralp.recommend`` with a calibration: every mode, the best, the skewness verdict."""

import ralp
from ralp.models import build_model
from ralp.planner.calibration import Calibration, Entry


def test_recommend_uses_the_given_calibration():
    model = build_model("lenet", 10, 28)
    cal = Calibration([Entry("lenet", 4, 28, 10, None, 0.01, 0.002, 3)])
    rec = ralp.recommend(model, [4, 8], ["1gbit"], batch_size=4, calibration=cal)
    assert {p.mode for p in rec.predictions} == {"ps", "ralp-h", "ralp-n", "horovod", "stanza",
                                                  "collective"}
    assert [p.devices for p in rec.best()] == [4, 8]
    assert "S = " in rec.skewness_verdict
    # On a real cluster Horovod's step at N = 8 is one model step plus the ring: never less.
    hvd = next(p for p in rec.predictions if p.mode == "horovod" and p.devices == 8)
    assert hvd.step_time_s > 0.01




def test_calibrate_measures_the_models_compute_into_a_versioned_profile(tmp_path):
    import keras

    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Flatten()(keras.layers.Conv2D(4, 3)(inputs))
    x = keras.layers.Dense(64, activation="relu", name="fc1")(x)
    model = keras.Model(inputs, keras.layers.Dense(10, name="fc2")(x), name="mine")
    cal = ralp.calibrate(model, 8, steps=2)
    entry = cal.find("mine", 8, 16, 10)
    assert entry.full_s > 0 and 0 <= entry.tail_s <= entry.full_s
    cal.save(tmp_path / "c.json")
    assert Calibration.load(tmp_path / "c.json") == cal
