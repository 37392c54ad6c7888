"""Budgeted devices beside shared CPUs: a budgeted zoo run and the same setting on shared
CPUs, side by side, with the CPU each role used and how often it was throttled. Its tables
were read into the results page and kept no file; the script was deleted."""

from lab.registry import Lab, Step

SUMMARY = "budgeted runs beside shared-CPU runs: the CPU each role used"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
