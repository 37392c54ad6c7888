"""The synchronization paradigms (BSP, ASP, SSP, DSSP) on the real digits, plain PS with one
worker slowed by a fixed delay after each of its steps: accuracy against wall time, waits
and gaps. Then the results' table, as ``--show`` prints it."""

from lab.registry import Lab, Step

SUMMARY = "BSP / ASP / SSP / DSSP on the digits, one worker slowed: time to accuracy"
NEEDS = ("root",)
SETTINGS = {"4-workers": "4 workers, worker 0 delayed 0.3 s after each of its steps",
            "3-workers": "3 workers, worker 0 delayed 0.4 s after each of its steps"}

RUNS = {"4-workers": ("sync_digits", ("bsp", "asp", "ssp:3", "ssp:9", "ssp:15", "dssp:3:15"),
                      ("--workers", "4", "--slow-worker", "0:+0.3", "--steps", "480")),
        "3-workers": ("sync_digits_3w_3x", ("bsp", "asp", "ssp:3", "ssp:15", "dssp:3:15"),
                      ("--workers", "3", "--slow-worker", "0:+0.4", "--steps", "360"))}


def steps(lab: Lab) -> list[Step]:
    stem, syncs, args = RUNS[lab.setting]
    study = (lab.python, "-m", "lab.studies.sync_digits")
    return [Step((*study, "--syncs", *syncs, *args, "--target", "0.9",
                  "--out", lab.path(f"{stem}.json"), "--plot", lab.path(f"{stem}.png"))),
            Step((*study, "--show", lab.path(f"{stem}.json")), stdout=lab.path(f"{stem}.txt"))]
