"""A simulated cluster on one machine: one network namespace per task, links shaped with tc.

``LocalCluster`` puts every task on loopback, where bandwidth is practically unlimited and
shared by nothing, so it cannot show what a PS-bound job does on a real network. Here each
task (chief, workers, PS) gets its own network namespace with one veth "NIC" on a bridge in a
dedicated switch namespace, and both ends of every link are shaped with ``tbf``: a PS that
several workers read from is the bottleneck, as on real hosts with one NIC each. Link byte
counters measure what actually crossed. Needs root; see ``docs/notes/netns.md`` for the
measured recipe (commands, shaping accuracy, counter overhead, cleanup behaviour).

Nothing of a run is visible in the root namespace (bridge and veths live in the switch
namespace), nothing is routed anywhere (no uplink, no default route), and everything is
removed on ``close()``: task processes by PID first (``LocalCluster``), then the namespaces.
Namespaces of runs that were killed outright are swept by the next run (``rlp<dead pid>-*``).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from ralp.defaults import DEFAULT_BANDWIDTH
from ralp.emulation.counters import interface_bytes, read_link_bytes
from ralp.emulation.iproute import (
    NETNS_DIR,
    delete_namespaces,
    netns_unavailable_reason,
    run_command,
    sweep_stale,
)
from ralp.errors import ClusterError
from ralp.profiler.links import LinkBytes
from ralp.units import parse_bandwidth, parse_latency

SUBNET = "10.213.0.0/16"  # hosts get 10.213.<a>.<b>; /16 so many jobs fit
PORT = 2222  # every task uses the same port (each netns has its own port space)

_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,14}$")  # an interface name (<= 15)
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# Interface names inside the switch namespace; a host's switch-side veth is named after it.
_BRIDGE = "br0"
_FRONT, _BACK = "br-front", "br-back"
_TRUNK_FRONT, _TRUNK_BACK = "trunk-front", "trunk-back"  # one veth pair joining the bridges
_RESERVED = {"lo", "eth0", _BRIDGE, _FRONT, _BACK, _TRUNK_FRONT, _TRUNK_BACK}
_NO_NETEM = (
    "latency emulation needs the kernel's netem qdisc (CONFIG_NET_SCH_NETEM), which this "
    "kernel lacks; omit --latency"
)


@dataclass(frozen=True)
class Host:
    name: str  # short ("chief", "w0", "j1-ps0"); also its veth's name in the switch namespace
    namespace: str  # f"{fabric.prefix}-{name}"
    address: str  # IPv4 in SUBNET
    side: str  # "front" (workers, chief) or "back" (PS tasks)


def _tbf(rate: int) -> str:
    # burst >= 64 KB keeps GSO super-packets whole (exact, cheap counters; notes §2-3);
    # 1 ms worth of bytes at high rates. latency only bounds the queue, it adds no delay.
    burst = max(128 * 1024, rate // 8 // 1000)
    return f"tbf rate {rate}bit burst {burst} latency 50ms"


class NetnsFabric:
    """Namespaces for hosts joined by a bridge in a dedicated switch namespace; every host link
    shaped with tbf on both veth ends to ``bandwidth`` (None = unshaped).

    With ``trunk_bandwidth`` the switch has two bridges, 'front' (workers, chiefs) and 'back'
    (PS tasks), joined by one veth pair (the trunk) shaped on both ends to ``trunk_bandwidth``:
    a single bottleneck shared by all worker<->PS traffic, to study several jobs on one
    network. Without it, 'back' hosts attach to the same single bridge as 'front' hosts.
    """

    def __init__(
        self,
        bandwidth: str | None = DEFAULT_BANDWIDTH,
        latency: str | None = None,
        trunk_bandwidth: str | None = None,
        prefix: str | None = None,
    ):
        self.bandwidth = bandwidth
        self.latency = latency
        self.trunk_bandwidth = trunk_bandwidth
        self.rate = parse_bandwidth(bandwidth) if bandwidth is not None else None
        self.delay = parse_latency(latency) if latency is not None else None
        self.trunk_rate = parse_bandwidth(trunk_bandwidth) if trunk_bandwidth is not None else None
        self.prefix = prefix if prefix is not None else f"rlp{os.getpid()}"
        if not _PREFIX.match(self.prefix):
            raise ClusterError(f"namespace prefix {self.prefix!r}: use letters, digits, '_.-'")
        self.switch_namespace = f"{self.prefix}-sw"
        self._hosts: dict[str, Host] = {}
        self._created: list[str] = []  # namespaces to delete on close, switch first
        self._next_address = 1

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> NetnsFabric:
        reason = netns_unavailable_reason()
        if reason is not None:
            raise ClusterError(reason)
        if self._created:
            return self
        sweep_stale()
        sw = self.switch_namespace
        if os.path.exists(os.path.join(NETNS_DIR, sw)):
            raise ClusterError(
                f"network namespace {sw} exists: a fabric with prefix "
                f"{self.prefix!r} is open already; give each its own prefix"
            )
        run_command(f"ip netns add {sw}")
        self._created.append(sw)
        try:
            bridges = [_FRONT, _BACK] if self.trunk_rate is not None else [_BRIDGE]
            for bridge in bridges:
                run_command(f"ip -n {sw} link add name {bridge} type bridge")
                # up is REQUIRED (connect() fails through a down bridge); addrgenmode none:
                # no IPv6 chatter from the switch itself in the hosts' counters
                run_command(f"ip -n {sw} link set dev {bridge} addrgenmode none up")
            if self.trunk_rate is not None:
                run_command(f"ip -n {sw} link add name {_TRUNK_FRONT} type veth peer name {_TRUNK_BACK}")
                for end, bridge in ((_TRUNK_FRONT, _FRONT), (_TRUNK_BACK, _BACK)):
                    run_command(f"tc -n {sw} qdisc add dev {end} root handle 10: {_tbf(self.trunk_rate)}")
                    run_command(f"ip -n {sw} link set dev {end} addrgenmode none master {bridge} up")
        except BaseException:
            self.close()
            raise
        return self

    def add_host(self, name: str, side: str = "front") -> Host:
        if not self._created:
            raise ClusterError("open the fabric (NetnsFabric.open or `with`) before adding hosts")
        if not _HOST_NAME.match(name) or name in _RESERVED:
            raise ClusterError(
                f"host name {name!r}: use 1-15 letters, digits, '_' or '-' "
                f"(it names a network interface), not one of {sorted(_RESERVED)}"
            )
        if side not in ("front", "back"):
            raise ClusterError(f"host {name}: side must be 'front' or 'back', got {side!r}")
        if name in self._hosts:
            raise ClusterError(f"host {name!r} exists on this fabric; give each host its own name")
        address = self._allocate_address()
        ns, sw = f"{self.prefix}-{name}", self.switch_namespace
        bridge = {"front": _FRONT, "back": _BACK}[side] if self.trunk_rate else _BRIDGE
        run_command(f"ip netns add {ns}")
        self._created.append(ns)
        try:
            # both ends created directly in their namespaces: no name ever shows up in the root
            run_command(f"ip -n {sw} link add name {name} type veth peer name eth0 netns {ns}")
            self._shape(ns, sw, name)
            run_command(f"ip -n {sw} link set dev {name} addrgenmode none master {bridge} up")
            run_command(f"ip -n {ns} addr add {address}/{SUBNET.split('/')[1]} dev eth0")
            # addrgenmode none: no IPv6 link-local, so a host sends nothing it was not asked to
            run_command(f"ip -n {ns} link set dev eth0 addrgenmode none up")
            run_command(f"ip -n {ns} link set dev lo up")
        except BaseException:
            self._created.remove(ns)
            delete_namespaces([ns])  # its veth (and the switch-side peer) go with it
            raise
        host = Host(name, ns, address, side)
        self._hosts[name] = host
        return host

    def _shape(self, ns: str, sw: str, name: str) -> None:
        parent = "root"
        if self.delay is not None:
            # netem delays what the host sends, so a round trip between two hosts is 2 x delay;
            # tbf goes under it as its child. limit: the default 1000 packets is below the BDP.
            command = (f"tc -n {ns} qdisc add dev eth0 root handle 1: "
                       f"netem delay {round(self.delay * 1e6)}us limit 100000")
            done = subprocess.run(command.split(), capture_output=True, text=True)
            if "Specified qdisc kind is unknown" in done.stderr:
                raise ClusterError(_NO_NETEM)
            if done.returncode != 0:
                raise ClusterError(f"`{command}` failed: {done.stderr.strip()}")
            parent = "parent 1:1"
        if self.rate is not None:
            tbf = _tbf(self.rate)
            run_command(f"tc -n {ns} qdisc add dev eth0 {parent} handle 10: {tbf}")  # upload
            run_command(f"tc -n {sw} qdisc add dev {name} root handle 10: {tbf}")  # download

    def _allocate_address(self) -> str:
        # never reused, skipping .0 and .255 so no address looks like a network or broadcast one
        n = self._next_address
        while n % 256 in (0, 255):
            n += 1
        if n >= 65535:
            raise ClusterError(f"no free address left in {SUBNET}")
        self._next_address = n + 1
        return f"10.213.{n // 256}.{n % 256}"

    def remove_host(self, name: str) -> None:
        """Delete one host's namespace (a job leaving a shared fabric); unknown names are ignored.

        Its link disappears once no process is left inside it: kill those first.
        """
        host = self._hosts.pop(name, None)
        if host is not None:
            self._created.remove(host.namespace)
            delete_namespaces([host.namespace])

    def close(self) -> None:
        created, self._created = self._created, []
        self._hosts.clear()
        # hosts first, then the switch: deleting the switch takes br0 and every peer with it
        delete_namespaces(created[1:] + created[:1])

    def __enter__(self) -> NetnsFabric:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ inspection

    def hosts(self) -> list[Host]:
        return list(self._hosts.values())

    def link_bytes(self, names: list[str] | None = None) -> dict[str, LinkBytes]:
        """Bytes each host's link carried so far: tx = sent by the host, rx = received by it.

        Counters include Ethernet/IP/TCP headers. They are read from the switch-side veth ends,
        all in one call: a veth's rx counter *is* its peer's tx counter (the kernel reports the
        peer's), so switch-side rx == host eth0 tx to the byte, and vice versa.
        """
        names = list(self._hosts) if names is None else list(names)
        unknown = [n for n in names if n not in self._hosts]
        if unknown:
            raise ClusterError(f"no host(s) {unknown} on this fabric; hosts: {list(self._hosts)}")
        return read_link_bytes(self.switch_namespace, names)

    def trunk_bytes(self) -> LinkBytes | None:
        """Bytes over the trunk: tx = front -> back (to the PS side), rx = back -> front."""
        if self.trunk_rate is None or not self._created:
            return None
        tx, rx = interface_bytes(self.switch_namespace, _TRUNK_FRONT)[_TRUNK_FRONT]
        return LinkBytes(tx=tx, rx=rx)
