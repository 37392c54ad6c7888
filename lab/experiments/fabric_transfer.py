"""gRPC's CPU per byte on the simulated fabric, by the calibration's probe, at the budgeted
sweep's link rates and 10 Gbit/s on N = 4 and 8 budgets, beside the loopback probe and the
figures the budgeted plain PS records show (transfer-cpu). It also writes, per budget, a
calibration holding only these figures, which the validations lend to records whose own
calibrations predate the probe (planner-devices, ``--overlap-from``)."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "gRPC's CPU per byte on the fabric per rate and budget, lent to older records"
NEEDS = ("root",)


def steps(lab: Lab) -> list[Step]:
    return [tool(lab, "fabric_transfer_cpu", "--rates", "500mbit", "1gbit", "10gbit",
                 "--devices", "4", "8", "--records", lab.of("transfer-cpu", "transfer_cpu.json"),
                 "--out", lab.path("fabric_transfer.json"),
                 stdout=lab.path("fabric_transfer.txt"))]
