"""Link byte counters of a simulated cluster: what each task's link really carried.

Counters are read from the switch-side veth ends of a :class:`~ralp.emulation.fabric.NetnsFabric`
(one ``ip -s -j link show`` for all of them). A veth's rx counter *is* its peer's tx counter,
so switch-side rx == host tx to the byte. Nothing here imports TensorFlow: the bench reads
counters from processes that must not load it just for that.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ralp.emulation.iproute import run_command
from ralp.profiler.links import LinkBytes


def read_link_bytes(switch_namespace: str, names: list[str]) -> dict[str, LinkBytes]:
    """Host name -> bytes its link carried so far (tx = sent by the host), read from the
    switch-side veth ends in one call (see :meth:`ralp.emulation.fabric.NetnsFabric.link_bytes`)."""
    if not names:
        return {}
    counters = interface_bytes(switch_namespace, *names)
    return {n: LinkBytes(tx=counters[n][1], rx=counters[n][0]) for n in names}


def interface_bytes(namespace: str, *dev: str) -> dict[str, tuple[int, int]]:
    """ifname -> (tx bytes, rx bytes) from one `ip -s -j link show` in a namespace."""
    only = f" dev {dev[0]}" if len(dev) == 1 else ""
    links = json.loads(run_command(f"ip -n {namespace} -s -j link show{only}"))
    return {
        link["ifname"]: (link["stats64"]["tx"]["bytes"], link["stats64"]["rx"]["bytes"])
        for link in links
    }


@dataclass(frozen=True)
class TaskLinks:
    """Reads the link counters of a cluster's tasks ("worker:0" -> bytes) on one fabric."""

    switch_namespace: str
    hosts: tuple[tuple[str, str], ...]  # (task, host name on the fabric)

    def __call__(self) -> dict[str, LinkBytes]:
        counts = read_link_bytes(self.switch_namespace, [host for _, host in self.hosts])
        return {task: counts[host] for task, host in self.hosts}
