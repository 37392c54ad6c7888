"""Stanza's per-link bytes against the payload model where the payload dominates Horovod's
control plane: lenet at batch 128, one and two FC ranks, N = 4 and 8. Shared CPUs, as
recorded."""

from lab.experiments._common import bench, gather, netns
from lab.registry import Lab, Step

SUMMARY = "Stanza's link bytes against the payload model: lenet, batch 128, F = 1 and 2"
NEEDS = ("root", "horovod")


def steps(lab: Lab) -> list[Step]:
    runs = [bench(lab, *netns("1gbit"), "--models", "lenet", "--batch-size", "128", "--modes",
                  "stanza", "--devices", "4", "8", "--fc-workers", fc, "--steps", "10",
                  "--device-cpus", "shared", "--quiet", "--out", lab.path(f"parts/f{fc}.json"),
                  may_fail=True)
            for fc in ("1", "2")]
    return runs + gather(lab, "parts", ["f1", "f2"], "--out", lab.path("bench_stanza_bytes.json"))
