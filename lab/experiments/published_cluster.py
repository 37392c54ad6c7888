"""The planner's real-cluster model against TensorFlow's published multi-node results (EC2
p2.8xlarge, 8 K80 per instance, 8-64 GPUs), from the one-GPU figure and published hardware
figures only, nothing fitted; then its predictions of ralp's other modes on that cluster
(lab/tools/published_cluster.py)."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "the planner against TensorFlow's published 8-64 GPU results, nothing fitted"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "published_cluster", "--output", lab.path("published_cluster.json"))]
