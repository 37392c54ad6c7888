"""What RALP's placement costs (profile, plan, device function, first step, cloning onto the
cluster) against one training step of vgg19, RALP and plain PS on a local cluster. The
target was met; the script was deleted."""

from lab.registry import Lab, Step

SUMMARY = "what placement costs against one training step, vgg19 (target met)"
NEEDS = ("retired",)


def steps(lab: Lab) -> list[Step]:
    return []
