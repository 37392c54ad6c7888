"""``ralp.wrap(mode="auto")`` on a real local cluster: the choice trains and says why."""

import pytest

import ralp
from ralp.cluster.fresh_process import run_in_fresh_process
from ralp.cluster.local import LocalCluster
from ralp.planner.cluster_plan import DECISION_MARGIN
from tests import cluster_jobs as jobs


@pytest.mark.cluster
def test_wrap_auto_trains_the_mode_it_chose_and_says_why(tmp_path):
    path = tmp_path / "cal.json"
    ralp.calibrate(jobs.small_cnn(), batch_size=jobs.BATCH).save(path)
    with LocalCluster(workers=2, ps=1) as cluster:
        estimated = run_in_fresh_process(jobs.wrap_auto, cluster.spec, None, timeout=600)
        out = run_in_fresh_process(jobs.wrap_auto, cluster.spec, str(path), timeout=600)
    # without a calibration: estimated from FLOPs at this host's rates, no cluster run
    assert "estimated from the model's FLOPs" in estimated["auto"]["calibration"]
    # its tasks share this host: loopback links, not an assumed rate
    assert "loopback: every task on this host's" in estimated["auto"]["why"]
    assert "assumed" not in estimated["auto"]["why"]
    assert len(estimated["losses"]) == 2
    auto = out["auto"]
    figures = auto["predicted_images_per_sec"]
    assert set(figures) == {"ps", "ralp"}
    assert out["mode"] == auto["chosen"]
    if out["mode"] == "ralp":  # placed only where predicted faster by the margin
        assert figures["ralp"] > figures["ps"] * (1 + DECISION_MARGIN)
    assert out["plan_empty"] == (out["mode"] == "ps")
    assert str(path) in auto["calibration"]
    assert auto["why"].startswith(f"auto chose {out['mode']}: ")
    assert "the skewness rule:" in auto["why"]
    assert len(out["losses"]) == 2
    assert out["weights_untouched_by_calibration"]
