"""Five keras.applications networks at 64 px (no weights), two epochs of scikit-learn's digits
in modes ps, ralp and auto on LocalCluster(workers=2, ps=1) with the default ralp.Failures,
beside one Keras process on the same data (lab/tools/real_networks.py); EfficientNetB0 in
mode collective too (two workers of a TF_CONFIG job)."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "keras.applications networks with the defaults in ps, ralp, auto, beside Keras"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    out = lab.path("real_networks.txt")
    return [tool(lab, "real_networks", "--modes", "ps", "ralp", "auto", "keras", "--out",
                 lab.path("real_networks.json"), stdout=out),
            tool(lab, "real_networks", "--models", "efficientnetb0", "--modes", "collective",
                 "--out", lab.path("real_networks_collective.json"), stdout=out, append=True)]
