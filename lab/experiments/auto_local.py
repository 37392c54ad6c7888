"""wrap's mode "auto" on the user's own LocalCluster(workers=2, ps=1), its tasks sharing this
host: the prediction it makes with the defaults beside plain PS and RALP measured in three
interleaved rounds, on five models ralp does not ship (two FC-heavy, three conv-heavy), with
each decision rule's choice on the same prediction (lab/tools/auto_local.py); then one Keras
process's step on each model, the reference the FLOP estimate is read against."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "wrap's auto on a LocalCluster: predicted against measured ps and ralp, each rule"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "auto_local", "--repeat", "3", "--steps", "16", "--out", lab.path("auto_local.json"),
                 stdout=lab.path("auto_local.txt")),
            tool(lab, "auto_local", "--keras", "--steps", "16", stdout=lab.path("keras_steps.txt"))]
