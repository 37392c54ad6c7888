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

import contextlib
import ctypes
import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from ralp.profiler.links import LinkBytes
from ralp.ps_strategy.cluster import ClusterError, ClusterSpec, LocalCluster

SUBNET = "10.213.0.0/16"  # hosts get 10.213.<a>.<b>; /16 so many jobs fit
PORT = 2222  # every task uses the same port (each netns has its own port space)

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"  # where `ip netns` keeps its named namespaces
_STALE = re.compile(r"^rlp(\d+)-")  # namespaces this project creates: rlp<launcher pid>-...
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,14}$")  # an interface name (<= 15)
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_BANDWIDTH = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(bit|kbit|mbit|gbit|tbit)$")
_LATENCY = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(s|ms|us)$")
_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}  # as tc
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}

# Interface names inside the switch namespace; a host's switch-side veth is named after it.
_BRIDGE = "br0"
_FRONT, _BACK = "br-front", "br-back"
_TRUNK_FRONT, _TRUNK_BACK = "trunk-front", "trunk-back"  # one veth pair joining the bridges
_RESERVED = {"lo", "eth0", _BRIDGE, _FRONT, _BACK, _TRUNK_FRONT, _TRUNK_BACK}
_NO_NETEM = (
    "latency emulation needs the kernel's netem qdisc (CONFIG_NET_SCH_NETEM), which this "
    "kernel lacks; omit --latency"
)


@functools.cache
def netns_unavailable_reason() -> str | None:
    """None when the netns backend can run here; else what is missing and what to do."""
    if os.geteuid() != 0:
        return (
            "the 'netns' backend needs root (it creates network namespaces, veth pairs and tc "
            "qdiscs); run as root or use the 'local' backend"
        )
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "the 'netns' backend needs iproute2 ('ip' and 'tc'): apt-get install iproute2"
    # Root is not enough in a container without CAP_SYS_ADMIN/CAP_NET_ADMIN: trying is the
    # only reliable test. The name matches the stale sweep, so even a crash here is cleaned.
    probe = f"rlp{os.getpid()}-probe"
    try:
        added = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    if added.returncode != 0:
        return (
            f"`ip netns add` failed: {added.stderr.strip() or f'exit code {added.returncode}'} "
            "(the 'netns' backend needs CAP_SYS_ADMIN and CAP_NET_ADMIN); use the 'local' backend"
        )
    return None


def parse_bandwidth(text: str) -> int:
    """A tc-style rate ('1gbit', '100mbit', '2.5gbit') in bits per second (k/m/g = 1000s)."""
    m = _BANDWIDTH.match(str(text).strip().lower())
    rate = round(float(m[1]) * _RATE_UNITS[m[2]]) if m else 0
    if rate <= 0:
        raise ClusterError(
            f"bandwidth {text!r} is not a positive rate; write it like '1gbit', '100mbit' "
            "or '500kbit'"
        )
    return rate


def parse_latency(text: str) -> float:
    """A delay ('10ms', '0.5ms', '100us', '1s') in seconds."""
    m = _LATENCY.match(str(text).strip().lower())
    seconds = float(m[1]) * _TIME_UNITS[m[2]] if m else 0.0
    if seconds <= 0:
        raise ClusterError(
            f"latency {text!r} is not a positive delay; write it like '10ms', '0.5ms' or "
            "'100us' (omit it for none)"
        )
    return seconds


@dataclass(frozen=True)
class Host:
    name: str  # short ("chief", "w0", "j1-ps0"); also its veth's name in the switch namespace
    namespace: str  # f"{fabric.prefix}-{name}"
    address: str  # IPv4 in SUBNET
    side: str  # "front" (workers, chief) or "back" (PS tasks)


def _run(command: str) -> str:
    """Run one `ip`/`tc` command line; every word in it is a validated name, so split() is safe."""
    done = subprocess.run(command.split(), capture_output=True, text=True)
    if done.returncode != 0:
        raise ClusterError(f"`{command}` failed: {done.stderr.strip()}")
    return done.stdout


def _delete_namespaces(names: list[str]) -> None:
    """`ip netns del` each name, in order; never raises (cleanup must finish)."""
    if not names:
        return
    # -force: go on past names that are already gone; one process for all of them
    script = "".join(f"netns del {name}\n" for name in names)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["ip", "-force", "-batch", "-"],
            input=script,
            text=True,
            capture_output=True,
            timeout=60,
        )


def _sweep_stale() -> list[str]:
    """Delete namespaces of runs whose launcher is dead (SIGKILLed runs leave theirs)."""
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    stale = []
    for name in names:
        m = _STALE.match(name)
        pid = int(m[1]) if m else 0
        if pid <= 0 or pid == os.getpid():  # pid 0 would signal our own process group
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            stale.append(name)
        except (PermissionError, OverflowError):
            pass  # alive (someone else's), or not a pid at all: not ours to judge
    # switch namespaces last, like close(): hosts first
    stale.sort(key=lambda name: name.endswith("-sw"))
    _delete_namespaces(stale)
    return stale


def _tbf(rate: int) -> str:
    # burst >= 64 KB keeps GSO super-packets whole (exact, cheap counters; notes §2-3);
    # 1 ms worth of bytes at high rates. latency only bounds the queue, it adds no delay.
    burst = max(128 * 1024, rate // 8 // 1000)
    return f"tbf rate {rate}bit burst {burst} latency 50ms"


def read_link_bytes(switch_namespace: str, names: list[str]) -> dict[str, LinkBytes]:
    """Host name -> bytes its link carried so far (tx = sent by the host), read from the
    switch-side veth ends in one call (see :meth:`NetnsFabric.link_bytes`)."""
    if not names:
        return {}
    counters = _counters(switch_namespace, *names)
    return {n: LinkBytes(tx=counters[n][1], rx=counters[n][0]) for n in names}


def _counters(namespace: str, *dev: str) -> dict[str, tuple[int, int]]:
    """ifname -> (tx bytes, rx bytes) from one `ip -s -j link show` in a namespace."""
    only = f" dev {dev[0]}" if len(dev) == 1 else ""
    links = json.loads(_run(f"ip -n {namespace} -s -j link show{only}"))
    return {
        link["ifname"]: (link["stats64"]["tx"]["bytes"], link["stats64"]["rx"]["bytes"])
        for link in links
    }


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
        bandwidth: str | None = "1gbit",
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
        _sweep_stale()
        sw = self.switch_namespace
        if os.path.exists(os.path.join(NETNS_DIR, sw)):
            raise ClusterError(
                f"network namespace {sw} exists: a fabric with prefix "
                f"{self.prefix!r} is open already; give each its own prefix"
            )
        _run(f"ip netns add {sw}")
        self._created.append(sw)
        try:
            bridges = [_FRONT, _BACK] if self.trunk_rate is not None else [_BRIDGE]
            for bridge in bridges:
                _run(f"ip -n {sw} link add name {bridge} type bridge")
                # up is REQUIRED (connect() fails through a down bridge); addrgenmode none:
                # no IPv6 chatter from the switch itself in the hosts' counters
                _run(f"ip -n {sw} link set dev {bridge} addrgenmode none up")
            if self.trunk_rate is not None:
                _run(f"ip -n {sw} link add name {_TRUNK_FRONT} type veth peer name {_TRUNK_BACK}")
                for end, bridge in ((_TRUNK_FRONT, _FRONT), (_TRUNK_BACK, _BACK)):
                    _run(f"tc -n {sw} qdisc add dev {end} root handle 10: {_tbf(self.trunk_rate)}")
                    _run(f"ip -n {sw} link set dev {end} addrgenmode none master {bridge} up")
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
        _run(f"ip netns add {ns}")
        self._created.append(ns)
        try:
            # both ends created directly in their namespaces: no name ever shows up in the root
            _run(f"ip -n {sw} link add name {name} type veth peer name eth0 netns {ns}")
            self._shape(ns, sw, name)
            _run(f"ip -n {sw} link set dev {name} addrgenmode none master {bridge} up")
            _run(f"ip -n {ns} addr add {address}/{SUBNET.split('/')[1]} dev eth0")
            # addrgenmode none: no IPv6 link-local, so a host sends nothing it was not asked to
            _run(f"ip -n {ns} link set dev eth0 addrgenmode none up")
            _run(f"ip -n {ns} link set dev lo up")
        except BaseException:
            self._created.remove(ns)
            _delete_namespaces([ns])  # its veth (and the switch-side peer) go with it
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
                       f"netem delay {round(self.delay * 1e6)}us limit 100000")  # fmt: skip
            done = subprocess.run(command.split(), capture_output=True, text=True)
            if "Specified qdisc kind is unknown" in done.stderr:
                raise ClusterError(_NO_NETEM)
            if done.returncode != 0:
                raise ClusterError(f"`{command}` failed: {done.stderr.strip()}")
            parent = "parent 1:1"
        if self.rate is not None:
            tbf = _tbf(self.rate)
            _run(f"tc -n {ns} qdisc add dev eth0 {parent} handle 10: {tbf}")  # upload
            _run(f"tc -n {sw} qdisc add dev {name} root handle 10: {tbf}")  # download

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
            _delete_namespaces([host.namespace])

    def close(self) -> None:
        created, self._created = self._created, []
        self._hosts.clear()
        # hosts first, then the switch: deleting the switch takes br0 and every peer with it
        _delete_namespaces(created[1:] + created[:1])

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
        tx, rx = _counters(self.switch_namespace, _TRUNK_FRONT)[_TRUNK_FRONT]
        return LinkBytes(tx=tx, rx=rx)

    @staticmethod
    def enter(namespace: str) -> None:
        """Move the calling thread into a named network namespace, as `ip netns exec` does.

        For a freshly spawned child, before it imports TensorFlow: threads started afterwards
        inherit the namespace, threads that already exist do not. /sys is not remounted (that
        needs a mount namespace), so /sys/class/net still shows the old namespace's devices;
        sockets and /proc/self/net see the new one.
        """
        if "/" in namespace or namespace in ("", ".", ".."):
            raise ClusterError(f"{namespace!r} is not a network namespace name")
        path = os.path.join(NETNS_DIR, namespace)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise ClusterError(f"cannot open network namespace {namespace}: {e}") from None
        try:
            # Python 3.11 has no os.setns
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise ClusterError(
                    f"cannot enter network namespace {namespace}: {os.strerror(err)}"
                )
        finally:
            os.close(fd)


@dataclass(frozen=True)
class TaskLinks:
    """Reads the link counters of a cluster's tasks ("worker:0" -> bytes) on one fabric."""

    switch_namespace: str
    hosts: tuple[tuple[str, str], ...]  # (task, host name on the fabric)

    def __call__(self) -> dict[str, LinkBytes]:
        counts = read_link_bytes(self.switch_namespace, [host for _, host in self.hosts])
        return {task: counts[host] for task, host in self.hosts}


class NetnsCluster:
    """A PS cluster whose chief, workers and PS tasks each live in their own namespace on one
    NetnsFabric: real ``python -m ralp.server`` processes (via ``LocalCluster`` with the
    command prefix ``ip netns exec NS``), all on port 2222.

    The chief gets a namespace and address but no process: run the training job (coordinator)
    in ``chief_namespace``. With a shared ``fabric`` (several jobs), give each job its own
    ``host_prefix`` (e.g. "j0-") so host names stay unique.
    """

    def __init__(
        self,
        workers: int,
        ps: int,
        *,
        fabric: NetnsFabric | None = None,
        bandwidth: str | None = "1gbit",
        latency: str | None = None,
        host_prefix: str = "",
        device_type: str = "cpu",
        task_env: dict[str, dict[str, str]] | None = None,
        start_timeout: float = 120.0,
    ):
        if workers < 1 or ps < 1:
            raise ClusterError(f"need at least one worker and one PS task, got {workers} and {ps}")
        self.workers, self.ps = workers, ps
        self._owns_fabric = fabric is None
        self.fabric = fabric if fabric is not None else NetnsFabric(bandwidth, latency)
        self.host_prefix = host_prefix
        self.device_type = device_type
        self.task_env = task_env or {}  # "worker:0" -> extra environment (e.g. its GPU)
        self.start_timeout = start_timeout
        self._hosts: dict[str, Host] = {}  # "worker:0" -> host
        self._cluster: LocalCluster | None = None
        self.spec: ClusterSpec | None = None

    def start(self) -> ClusterSpec:
        try:
            if self._owns_fabric:
                self.fabric.open()
            p = self.host_prefix
            self._hosts["chief:0"] = self.fabric.add_host(f"{p}chief")
            for i in range(self.workers):
                self._hosts[f"worker:{i}"] = self.fabric.add_host(f"{p}w{i}")
            for i in range(self.ps):
                self._hosts[f"ps:{i}"] = self.fabric.add_host(f"{p}ps{i}", side="back")
            addr = {task: f"{h.address}:{PORT}" for task, h in self._hosts.items()}
            self.spec = ClusterSpec(
                chief=addr["chief:0"],
                workers=tuple(addr[f"worker:{i}"] for i in range(self.workers)),
                ps=tuple(addr[f"ps:{i}"] for i in range(self.ps)),
            )
            # `ip netns exec` is setns + exec, no fork: the Popen pid is the task itself, so
            # LocalCluster's kill-by-PID and --parent-pid watching work unchanged.
            prefix = {t: ["ip", "netns", "exec", h.namespace] for t, h in self._hosts.items()}
            self._cluster = LocalCluster(
                spec=self.spec,
                start_timeout=self.start_timeout,
                command_prefix=prefix,
                device_type=self.device_type,
                task_env=self.task_env,
            )
            self._cluster.start()
        except BaseException:
            self.stop()
            raise
        return self.spec

    def stop(self) -> None:
        try:
            if self._cluster is not None:
                self._cluster.stop()  # by PID: deleting a namespace kills nothing
        finally:
            if self._owns_fabric:
                self.fabric.close()
            else:
                for host in self._hosts.values():
                    self.fabric.remove_host(host.name)
            self._hosts.clear()

    def __enter__(self) -> NetnsCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ inspection

    @property
    def chief_namespace(self) -> str:
        return self._host("chief:0").namespace

    def task_hosts(self) -> dict[str, str]:
        return {task: host.name for task, host in self._hosts.items()}

    def link_bytes(self) -> dict[str, LinkBytes]:
        return self.link_reader()()

    def link_reader(self) -> TaskLinks:
        """A picklable reader of this cluster's link counters, keyed by task: a coordinator in
        another process reads them itself, right at the edges of its measured steps."""
        hosts = tuple((task, host.name) for task, host in self._hosts.items())
        return TaskLinks(self.fabric.switch_namespace, hosts)

    @property
    def pids(self) -> dict[str, int]:
        return self._local().pids

    def alive(self) -> dict[str, bool]:
        return self._local().alive()

    def kill_task(self, job: str, index: int) -> None:
        self._local().kill_task(job, index)

    def log_text(self, job: str, index: int) -> str:
        return self._local().log_text(job, index)

    def _host(self, task: str) -> Host:
        if task not in self._hosts:
            raise ClusterError("the netns cluster is not running; call start() first")
        return self._hosts[task]

    def _local(self) -> LocalCluster:
        if self._cluster is None:
            raise ClusterError("the netns cluster was not started; call start() first")
        return self._cluster
