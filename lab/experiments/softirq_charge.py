"""Is the kernel's network work for other devices (softirqs, which this kernel charges to
whichever task they interrupt) charged to a budgeted device's CPU quota? A CPU-bound spinner
in a device's budget, alone and while other namespaces exchanged TCP traffic. It was not;
the probe was deleted."""

from lab.registry import Lab, Step

SUMMARY = "is other devices' network work charged to a budgeted device? (no)"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
