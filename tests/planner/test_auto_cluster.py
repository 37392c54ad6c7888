"""``ralp.wrap(mode="auto")`` on a real local cluster: the choice trains and says why."""

import pytest

import ralp
from ralp.cluster.fresh_process import ChildError, run_in_fresh_process
from ralp.cluster.local import LocalCluster
from tests import cluster_jobs as jobs


@pytest.mark.cluster
def test_wrap_auto_trains_the_mode_it_chose_and_says_why(tmp_path):
    path = tmp_path / "cal.json"
    # Calibrated in this process: the coordinator (a daemon process) cannot start the
    # processes that measure a shared host's contention, and says so.
    ralp.calibrate(jobs.small_cnn(), batch_size=jobs.BATCH, shared_host=True).save(path)
    with LocalCluster(workers=2, ps=1) as cluster:
        with pytest.raises(ChildError, match="needs the host's contention measured"):
            run_in_fresh_process(jobs.wrap_auto, cluster.spec, None, timeout=600)
        out = run_in_fresh_process(jobs.wrap_auto, cluster.spec, str(path), timeout=600)
    auto = out["auto"]
    figures = auto["predicted_images_per_sec"]
    assert set(figures) == {"ps", "ralp"}
    assert out["mode"] == auto["chosen"] == max(figures, key=figures.get)
    assert out["plan_empty"] == (out["mode"] == "ps")
    assert str(path) in auto["calibration"] and "shared host" in auto["calibration"]
    assert auto["why"].startswith(f"auto chose {out['mode']}: ")
    assert len(out["losses"]) == 2
    assert out["weights_untouched_by_calibration"]  # timing ran on a clone
