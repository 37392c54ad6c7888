"""Batched pulls (iBatch) on a real cluster: the same training as ParameterServerStrategy's own
pulls, and the batches the plan shows."""

import numpy as np
import pytest

from ralp import LocalCluster, run_in_fresh_process
from tests import cluster_jobs as jobs

pytestmark = pytest.mark.cluster
DETERMINISTIC = {"TF_ENABLE_ONEDNN_OPTS": "0"}  # same kernels in every process


@pytest.mark.parametrize("mode", ["ps", "ralp"])
def test_every_pull_schedule_trains_like_the_default(mode):
    steps, losses = 10, {}
    for schedule in ("default", "layer", "ibatch"):
        with LocalCluster(workers=1, ps=2, env=DETERMINISTIC) as cluster:
            losses[schedule] = run_in_fresh_process(
                jobs.cluster_losses, cluster.spec, mode, "adam", steps,
                pull_schedule=schedule, env=DETERMINISTIC, timeout=300,
            )
    assert len(losses["default"]) == steps
    np.testing.assert_allclose(losses["layer"], losses["default"], rtol=1e-5)
    np.testing.assert_allclose(losses["ibatch"], losses["default"], rtol=1e-5)
