"""Placement audits: alexnet, vgg11 and vgg19 scaled down, RALP and plain PS, one and two PS
tasks, each ``ralp.audit`` on a fresh local cluster reading worker 0's partition graphs:
misplaced ops, offloaded variables' bytes crossing, measured against modelled bytes
(lab/tools/audit_zoo.py). Shared CPUs."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "placement audits of three models, RALP and plain PS, 1 and 2 PS tasks"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "audit_zoo", "--workers", "2", "--out", lab.path("audit_zoo.json"),
                 stdout=lab.path("audit_zoo.txt"))]
