"""A ``keras.applications`` network trains in the PS modes with the defaults: EfficientNetB0
at 64 px (the network whose first step used to outlast the default step timeout: its
one-time work counted against it), two short epochs on a real local cluster, the default
``ralp.Failures``. The whole matrix of networks and modes, against one Keras process:
``python -m lab.tools.real_networks`` (lab/results/real-networks/).
"""

import math

import pytest

from ralp import LocalCluster, run_in_fresh_process
from tests import cluster_jobs as jobs

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("mode", ["ps", "ralp"])
def test_efficientnet_trains_with_the_defaults(mode):
    with LocalCluster(workers=2, ps=1) as cluster:
        out = run_in_fresh_process(jobs.keras_application, cluster.spec, mode, timeout=900)
    assert out["mode"] == mode and out["updates"] == 4
    assert len(out["loss"]) == 2 and all(math.isfinite(v) for v in out["loss"])
    # the update waits for its gradients through one gate: a few control edges per op, not
    # one per gradient for every op of the update (61 per node in the ledger's branch)
    assert out["control_edges"] < 2 * out["nodes"], out
