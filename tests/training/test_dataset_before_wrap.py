"""A tf.data pipeline made before ``ralp.wrap`` connected to the cluster serves
``validation_data``, ``evaluate`` and ``predict`` as the same arrays do in plain Keras."""

import pytest

from ralp.cluster.fresh_process import run_in_fresh_process
from ralp.cluster.local import LocalCluster
from tests import cluster_jobs as jobs


@pytest.mark.cluster
def test_a_dataset_made_before_wrap_validates_evaluates_and_predicts():
    with LocalCluster(workers=2, ps=1) as cluster:
        out = run_in_fresh_process(jobs.datasets_made_before_wrap, cluster.spec, timeout=600)
    plain = out["plain_evaluated"]
    assert out["val_loss"] == pytest.approx(plain["loss"], rel=1e-5)
    assert out["evaluated"] == pytest.approx(plain, rel=1e-5)
    assert out["predicted_equal"]
