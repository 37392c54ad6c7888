"""How far apart the recorded shared-CPU runs of one setting are, and so what any predictor
can reach on them: the best possible maximum error, the most records within 10%, and the
settings whose modes swap order between runs. A one-off reading of the records; the script
was deleted."""

from lab.registry import Lab, Step

SUMMARY = "how far the shared-CPU records of one setting lie apart"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
