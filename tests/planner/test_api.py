"""``ralp.recommend`` with a calibration: every mode, the best, the skewness verdict."""

import ralp
from ralp.models import build_model
from ralp.planner.calibration import Calibration, Entry
from ralp.planner.model import Host


def test_recommend_uses_the_given_calibration():
    model = build_model("lenet", 10, 28)
    cal = Calibration(Host(False), [Entry("lenet", 4, 28, 10, None, 0.01, 0.002, 3)])
    rec = ralp.recommend(model, [4, 8], ["1gbit"], batch_size=4, calibration=cal)
    assert {p.mode for p in rec.predictions} == {"ps", "ralp-h", "ralp-n", "horovod", "stanza"}
    assert [p.devices for p in rec.best()] == [4, 8]
    assert "S = " in rec.skewness_verdict
    # On a real cluster Horovod's step at N = 8 is one model step plus the ring: never less.
    hvd = next(p for p in rec.predictions if p.mode == "horovod" and p.devices == 8)
    assert hvd.step_time_s > 0.01
