"""The idle host's pace, second by second for two minutes: the work one CPU-second buys, per
kind of work (lab.host.pace_probes), over windows of 1, 10 and 30 s: how long a budgeted
run's window must be for the host's pace to average out."""

from lab.registry import Lab, Step

SUMMARY = "the idle host's pace over two minutes: how much a CPU-second's work moves"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    return [Step((lab.python, "-m", "lab.host.pace_probes", "--seconds", "120",
                  "--out", lab.path("host_pace_idle.json")))]
