"""The README's main job: the bench's short local run of every mode on the loopback cluster."""

from lab.registry import Lab, Step

SUMMARY = "the README's main job: python -m ralp.bench's short run, every mode, loopback"
NEEDS = ("horovod",)


def steps(lab: Lab) -> list[Step]:
    return [Step((lab.python, "-m", "ralp.bench", "--out", lab.path("bench.json"),
                  "--plot", lab.path("bench.png")))]
