"""Which decision margin picks the faster of plain PS and RALP where a 2% margin and a 15% band
disagree (RALP predicted 2-15% faster)? No run: a reading of the planner's recorded validations
on the simulated cluster's budgeted devices and of auto-local's records
(lab/tools/decision_margin.py)."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "the decision margin that picks the faster of ps and ralp, from recorded runs"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "decision_margin", "lab/results/auto-local/auto_local.json", "--out",
                 lab.path("decision_margin.json"), stdout=lab.path("decision_margin.txt"))]
