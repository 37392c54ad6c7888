"""Cluster specs: the addresses of a parameter-server cluster's chief, worker and PS tasks.

A :class:`ClusterSpec` is a small value object, parsed from ``TF_CONFIG`` or a mapping and
validated once (addresses, duplicates, the chief). Nothing here imports TensorFlow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ralp.errors import ClusterError

JOBS = ("chief", "worker", "ps")
# Jobs TF_CONFIG may name that take no part in PS training: Kubeflow's TFJob lists an
# Evaluator replica in every task's cluster (it runs evaluation beside training).
IGNORED_JOBS = ("evaluator",)
_ADDRESS = re.compile(r"^(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>\d{1,5})$")


@dataclass(frozen=True)
class ClusterSpec:
    """Addresses (``host:port``) of the chief, worker and PS tasks."""

    chief: str
    workers: tuple[str, ...]
    ps: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.workers:
            raise ClusterError("the cluster has no worker task; add at least one 'worker' address")
        if not self.ps:
            raise ClusterError("the cluster has no 'ps' task; parameter-server training needs one")
        seen: dict[str, str] = {}
        for job, index, address in self.tasks(include_chief=True):
            m = _ADDRESS.match(address) if isinstance(address, str) else None
            if m is None or not 0 < int(m["port"]) < 65536:
                raise ClusterError(
                    f"{job} task {index}: {address!r} is not a host:port address "
                    "(e.g. '10.0.0.5:2222' or 'localhost:2222')"
                )
            if address in seen:
                raise ClusterError(
                    f"{job} task {index} and {seen[address]} share the address {address}"
                )
            seen[address] = f"{job} task {index}"

    def tasks(self, include_chief: bool = False) -> list[tuple[str, int, str]]:
        out = [("chief", 0, self.chief)] if include_chief else []
        out += [("worker", i, a) for i, a in enumerate(self.workers)]
        out += [("ps", i, a) for i, a in enumerate(self.ps)]
        return out

    def address(self, job: str, index: int) -> str:
        addresses = {"chief": (self.chief,), "worker": self.workers, "ps": self.ps}.get(job)
        if addresses is None or not 0 <= index < len(addresses):
            raise ClusterError(f"no task {job}:{index} in this cluster")
        return addresses[index]

    def as_dict(self) -> dict[str, list[str]]:
        return {"chief": [self.chief], "worker": list(self.workers), "ps": list(self.ps)}

    def tf_config(self, job: str, index: int) -> str:
        self.address(job, index)
        return json.dumps({"cluster": self.as_dict(), "task": {"type": job, "index": index}})

    @classmethod
    def from_dict(cls, cluster: Mapping) -> ClusterSpec:
        if not isinstance(cluster, Mapping):
            raise ClusterError(f"a cluster is a mapping of job name to addresses, got {cluster!r}")
        unknown = set(cluster) - set(JOBS) - set(IGNORED_JOBS)
        if unknown:
            raise ClusterError(f"unknown job(s) {sorted(unknown)} in the cluster; use {list(JOBS)}"
                               + (" (Kubeflow's 'Master' replica type: use 'Chief')"
                                  if "master" in unknown else ""))
        chief = cluster.get("chief")
        if not chief or not isinstance(chief, list | tuple) or len(chief) != 1:
            raise ClusterError("the cluster needs exactly one 'chief' address (where the "
                               "coordinator runs), e.g. \"chief\": [\"host0:2222\"]")
        for job in ("worker", "ps"):
            if not isinstance(cluster.get(job, []), list | tuple):
                raise ClusterError(f"'{job}' must be a list of host:port addresses")
        return cls(chief[0], tuple(cluster.get("worker", ())), tuple(cluster.get("ps", ())))

    @classmethod
    def from_tf_config(cls, text: str | None) -> tuple[ClusterSpec, str, int]:
        """Parse ``TF_CONFIG``: the cluster and this process' task type and index.

        Also the form Kubeflow's TFJob generates (replica types Chief, Worker, PS, their
        hosts ``<job>-<type>-<i>.<namespace>.svc:2222``, an ``"environment": "cloud"`` entry
        and, if the job has one, an evaluator, which is left out of the cluster)."""
        if not text:
            raise ClusterError("TF_CONFIG is not set; see `python -m ralp.server --help`")
        try:
            config = json.loads(text)
        except json.JSONDecodeError as e:
            raise ClusterError(f"TF_CONFIG is not valid JSON: {e}") from None
        if not isinstance(config, dict) or "cluster" not in config or "task" not in config:
            raise ClusterError('TF_CONFIG needs "cluster" and "task" entries')
        spec = cls.from_dict(config["cluster"])
        task = config["task"]
        try:
            job, index = task["type"], int(task["index"])
        except (KeyError, TypeError, ValueError):
            raise ClusterError('TF_CONFIG "task" needs "type" and an integer "index"') from None
        if job in IGNORED_JOBS:
            raise ClusterError(f"TF_CONFIG names this task {job!r}, which takes no part in "
                               "ralp's training (run ralp.server on 'ps' and 'worker' tasks, "
                               "the training job on the 'chief')")
        spec.address(job, index)
        return spec, job, index


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    import portpicker

    ports: list[int] = []
    while len(ports) < count:
        port = portpicker.pick_unused_port()
        if port not in ports:
            ports.append(port)
    return ports


def local_spec(workers: int, ps: int, host: str = "127.0.0.1") -> ClusterSpec:
    ports = free_ports(1 + workers + ps, host)
    addr = [f"{host}:{p}" for p in ports]
    return ClusterSpec(addr[0], tuple(addr[1 : 1 + workers]), tuple(addr[1 + workers :]))
