"""The profiler's decision for one model of every ``keras.applications`` family, built
without weights at the smallest input it builds at (lab/tools/keras_applications.py)."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "the profiler on one model of every keras.applications family"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "keras_applications", "--out", lab.path("keras_applications.json"),
                 stdout=lab.path("keras_applications.txt"))]
