"""A gRPC transfer's CPU per byte on the simulated fabric, read from the budgeted plain PS
records (their tasks' CPU and link bytes), beside the calibration's loopback figure. It
led to measuring the cost on the fabric in the calibration itself (fabric-transfer, which
still reads this file); the script was deleted."""

from lab.registry import Lab, Step

SUMMARY = "a gRPC transfer's CPU per byte, read from budgeted plain PS records"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
