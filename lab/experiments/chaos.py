"""Every mode through its kills, restarted from checkpoints, against failure-free runs: plain
PS and RALP lose a worker and then the PS; Horovod and collective a rank; Stanza its FC rank
and then a CONV rank. Steps done and redone, accuracy, time lost, saving's cost, and what was
left running."""

from lab.registry import Lab, Step

SUMMARY = "every mode through SIGKILLs, from checkpoints, against failure-free runs"
NEEDS = ("root", "horovod")


def steps(lab: Lab) -> list[Step]:
    return [Step((lab.python, "-m", "lab.studies.chaos", "--modes", "ralp", "ps", "horovod",
                  "stanza", "collective", "--steps", "300", "--checkpoint-every", "50",
                  "--repeats", "3", "--out", lab.path("chaos_all.json")), may_fail=True)]
