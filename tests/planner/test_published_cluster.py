"""The real-cluster PS formula against TensorFlow's published multi-node results (EC2
p2.8xlarge, 8 K80 per node, tf_cnn_benchmarks distributed_replicated): every point inside
the planner's error band, from the one-GPU figures and published hardware figures alone."""

import pytest

from ralp.planner.cluster_plan import ERROR_BAND

pytestmark = pytest.mark.slow  # builds three Keras applications at full size (~15 s)

def test_every_published_point_lies_inside_the_error_band():
    from lab.tools.published_cluster import PUBLISHED, validate

    rows = validate()
    assert len(rows) == sum(len(t) - 1 for _, _, t in PUBLISHED.values())
    errors = sorted(abs(r["error"]) for r in rows)
    assert errors[-1] <= ERROR_BAND, rows
    assert errors[len(errors) // 2] <= 0.05, rows
