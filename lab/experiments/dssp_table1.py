"""The structure of the DSSP paper's Table I: two workers and one PS on the digits, worker 1
slowed by a fixed delay after each step, every paradigm (DSSP capped and as published) over
three seeds: time to 90% and 95% accuracy."""

from lab.registry import Lab, Step

SUMMARY = "the DSSP paper's Table I in structure: 2 workers + 1 PS, lenet on digits, 3 seeds"
NEEDS = ("root",)


def steps(lab: Lab) -> list[Step]:
    return [Step((lab.python, "-m", "lab.studies.sync_digits", "--syncs", "bsp", "asp", "ssp:3",
                  "ssp:6", "ssp:15", "dssp:3:15", "dssp-paper:3:15", "--workers", "2",
                  "--slow-worker", "1:+0.3", "--steps", "400", "--target", "0.9", "0.95",
                  "--seeds", "0", "1", "2", "--out", lab.path("dssp_table1.json"),
                  "--plot", lab.path("dssp_table1.png")))]
