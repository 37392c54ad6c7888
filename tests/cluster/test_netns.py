"""The netns backend: namespaces per host, shaped links, exact counters, and nothing left over."""

import json
import multiprocessing
import os
import re
import subprocess
import sys

import pytest

from ralp.cluster.netns_cluster import NetnsCluster
from ralp.cluster.spec import ClusterError
from ralp.emulation import iproute
from ralp.emulation.fabric import NetnsFabric
from ralp.emulation.iproute import enter_namespace, netns_unavailable_reason
from ralp.units import parse_bandwidth, parse_latency
from tests.needs import needs_netns

# ---------------------------------------------------------------- no root needed


@pytest.mark.parametrize(
    "text, bits",
    [("1gbit", 10**9), ("10GBit", 10**10), ("100mbit", 10**8), ("500kbit", 500_000),
     ("2.5gbit", 2_500_000_000), ("1000000bit", 10**6), (" 1gbit ", 10**9)],
)
def test_parse_bandwidth(text, bits):
    assert parse_bandwidth(text) == bits


@pytest.mark.parametrize("text", ["", "1", "1gb", "1 gbit/s", "0mbit", "-1gbit", "fast", "1e3bit"])
def test_parse_bandwidth_rejects(text):
    with pytest.raises(ClusterError, match="like '1gbit'"):
        parse_bandwidth(text)


@pytest.mark.parametrize(
    "text, seconds",
    [("10ms", 0.01), ("0.5ms", 0.0005), ("100us", 1e-4), ("1s", 1.0), ("2MS", 0.002)],
)
def test_parse_latency(text, seconds):
    assert parse_latency(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "10 min", "0ms", "-1ms", "1h", "soon"])
def test_parse_latency_rejects(text):
    with pytest.raises(ClusterError, match="like '10ms'"):
        parse_latency(text)


def test_bad_settings_fail_at_construction():
    with pytest.raises(ClusterError, match="bandwidth"):
        NetnsFabric(bandwidth="1gb")
    with pytest.raises(ClusterError, match="latency"):
        NetnsFabric(latency="5")
    with pytest.raises(ClusterError, match="bandwidth"):
        NetnsFabric(trunk_bandwidth="lots")
    NetnsFabric(bandwidth=None)  # unshaped is fine


def test_addresses_are_unique_and_skip_0_and_255():
    fabric = NetnsFabric()  # not opened: allocation is bookkeeping only
    addresses = [fabric._allocate_address() for _ in range(600)]
    assert len(set(addresses)) == 600 and addresses[0] == "10.213.0.1"
    assert addresses[253:255] == ["10.213.0.254", "10.213.1.1"]
    assert not any(a.endswith((".0", ".255")) for a in addresses)


def test_unavailable_reasons(monkeypatch):
    check = netns_unavailable_reason.__wrapped__  # the uncached function
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in check() and "'local' backend" in check()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(iproute.shutil, "which", lambda name: None)
    assert "apt-get install iproute2" in check()


# ---------------------------------------------------------------- root: real namespaces


def our_namespaces(prefix):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix + "-")]


def eth0_bytes(namespace):
    """(tx, rx) of a host's own eth0, read inside its namespace."""
    out = subprocess.run(["ip", "-n", namespace, "-s", "-j", "link", "show", "dev", "eth0"],
                         capture_output=True, text=True, check=True).stdout
    stats = json.loads(out)[0]["stats64"]
    return stats["tx"]["bytes"], stats["rx"]["bytes"]


RECEIVER = """
import socket, sys, time
srv = socket.create_server((sys.argv[1], 5001))
print("listening", flush=True)
conn, _ = srv.accept()
n, start = 0, None
while chunk := conn.recv(1 << 20):
    start = start or time.monotonic()
    n += len(chunk)
print(n, time.monotonic() - start, flush=True)
"""
SENDER = """
import socket, sys
with socket.create_connection((sys.argv[1], 5001), timeout=30) as s:
    s.sendall(b"x" * int(sys.argv[2]))
"""


def transfer(src, dst, payload):
    """Send payload bytes over TCP from host src to host dst; the receiver's (bytes, seconds)."""
    receiver = subprocess.Popen(
        ["ip", "netns", "exec", dst.namespace, sys.executable, "-c", RECEIVER, dst.address],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert receiver.stdout.readline().strip() == "listening"
        subprocess.run(["ip", "netns", "exec", src.namespace, sys.executable, "-c", SENDER,
                        dst.address, str(payload)], check=True, timeout=60)
        received, seconds = receiver.stdout.readline().split()
        receiver.wait(timeout=30)
        return int(received), float(seconds)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()


@needs_netns
def test_shaped_link_counts_and_limits_a_transfer():
    payload = 5_000_000
    with NetnsFabric(bandwidth="100mbit") as fabric:
        a, b = fabric.add_host("a"), fabric.add_host("b")
        assert re.fullmatch(r"10\.213\.\d+\.\d+", a.address) and a.address != b.address
        before = fabric.link_bytes()
        received, seconds = transfer(a, b, payload)
        after = fabric.link_bytes()
        assert received == payload
        sent = after["a"].tx - before["a"].tx
        got = after["b"].rx - before["b"].rx
        assert 1.0 * payload <= sent <= 1.06 * payload
        assert 1.0 * payload <= got <= 1.06 * payload
        mbit_s = payload * 8 / seconds / 1e6
        assert 30 < mbit_s <= 100 * 1.05, f"{mbit_s:.1f} Mbit/s through a 100mbit link"
        # the one-call switch-side read equals each host's own eth0 counters. The reads are
        # moments apart and the bridge may send a frame to every port in between (CI once saw
        # 54 bytes reach both hosts), so the switch-side read must lie between two host reads.
        hosts_before = {h.name: eth0_bytes(h.namespace) for h in (a, b)}
        switch_side = fabric.link_bytes(["a", "b"])
        hosts_after = {h.name: eth0_bytes(h.namespace) for h in (a, b)}
        for name in ("a", "b"):
            for field, lo, hi in zip(("tx", "rx"), hosts_before[name], hosts_after[name], strict=True):
                assert lo <= getattr(switch_side[name], field) <= hi, (name, field)
                assert hi - lo < 1500, f"{name} {field}: {hi - lo} bytes between two reads"
        assert fabric.trunk_bytes() is None


@needs_netns
def test_trunk_is_a_shared_bottleneck_between_front_and_back():
    payload = 2_000_000
    with NetnsFabric(bandwidth="1gbit", trunk_bandwidth="50mbit") as fabric:
        worker, ps = fabric.add_host("w0"), fabric.add_host("ps0", side="back")
        before = fabric.trunk_bytes()
        received, seconds = transfer(worker, ps, payload)
        after = fabric.trunk_bytes()
        assert received == payload
        assert payload <= after.tx - before.tx <= 1.06 * payload  # front -> back
        assert after.rx - before.rx < 0.05 * payload  # only ACKs come back
        assert payload * 8 / seconds / 1e6 <= 50 * 1.05  # the trunk, not the 1gbit host links


@needs_netns
def test_close_removes_every_namespace_also_after_an_exception():
    fabric = NetnsFabric(bandwidth=None, trunk_bandwidth="1gbit")
    with pytest.raises(RuntimeError, match="boom"), fabric:
        fabric.add_host("chief")
        fabric.add_host("ps0", side="back")
        assert len(our_namespaces(fabric.prefix)) == 3
        raise RuntimeError("boom")
    assert our_namespaces(fabric.prefix) == []
    fabric.close()  # idempotent
    with NetnsFabric() as fabric:
        fabric.add_host("w0")
        fabric.remove_host("w0")
        assert our_namespaces(fabric.prefix) == [fabric.switch_namespace]
    assert our_namespaces(fabric.prefix) == []


@needs_netns
def test_bad_host_names_are_refused():
    with NetnsFabric() as fabric:
        for name in ["a-name-too-long-x", "br0", "eth0", "a b", "w/0", ""]:
            with pytest.raises(ClusterError, match="host name"):
                fabric.add_host(name)
        fabric.add_host("w0")
        with pytest.raises(ClusterError, match="exists"):
            fabric.add_host("w0")
        with pytest.raises(ClusterError, match="side"):
            fabric.add_host("w1", side="middle")
        assert [h.name for h in fabric.hosts()] == ["w0"]


def dead_pid():
    for pid in range(4_194_000, 0, -1):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
    raise AssertionError("no free pid")


@needs_netns
def test_open_sweeps_namespaces_of_dead_runs_only():
    pid = dead_pid()
    stale = [f"rlp{pid}-w0", f"rlp{pid}-sw", f"rlp{pid}h-w1", f"rlp{pid}c-sw"]
    keep = f"keep-rlp{pid}-sw"  # not this project's pattern: never touched
    for name in [*stale, keep]:
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        with NetnsFabric() as fabric:
            out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            names = [line.split()[0] for line in out.splitlines() if f"rlp{pid}" in line]
            assert names == [keep]
            assert our_namespaces(fabric.prefix) == [fabric.switch_namespace]  # ours stay
    finally:
        subprocess.run(["ip", "-force", "-batch", "-"], text=True, capture_output=True,
                       input="".join(f"netns del {n}\n" for n in [*stale, keep]))


@needs_netns
def test_latency_without_netem_is_a_clear_error():
    with NetnsFabric(latency="5ms") as fabric:
        try:
            fabric.add_host("w0")
        except ClusterError as e:
            assert "netem" in str(e) and "omit --latency" in str(e)
        else:
            pytest.skip("this kernel has netem; the missing-netem error cannot be shown")
        assert fabric.hosts() == [] and our_namespaces(fabric.prefix) == [fabric.switch_namespace]


def _bind_inside(namespace, address, queue):
    """In a spawned child: enter the namespace, then bind to an address that only exists there."""
    import socket

    enter_namespace(namespace)
    with socket.socket() as s:
        s.bind((address, 0))
    with open("/proc/self/net/dev") as f:
        queue.put(sorted(line.split(":")[0].strip() for line in f if ":" in line))


@needs_netns
def test_enter_moves_a_fresh_process_into_the_namespace():
    with pytest.raises(ClusterError, match="cannot open"):
        enter_namespace("rlp-no-such-namespace")
    with NetnsFabric(bandwidth=None) as fabric:
        host = fabric.add_host("chief")
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        child = ctx.Process(target=_bind_inside, args=(host.namespace, host.address, queue))
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0
        assert queue.get(timeout=5) == ["eth0", "lo"]


@needs_netns
@pytest.mark.cluster
def test_netns_cluster_starts_serves_and_cleans_up_after_a_crash():
    cluster = NetnsCluster(workers=1, ps=1, bandwidth="1gbit", start_timeout=90)
    spec = cluster.start()
    try:
        prefix = cluster.fabric.prefix
        assert cluster.task_hosts() == {"chief:0": "chief", "worker:0": "w0", "ps:0": "ps0"}
        assert all(re.fullmatch(r"10\.213\.\d+\.\d+:2222", a) for _, _, a in spec.tasks(True))
        pids = cluster.pids
        assert set(pids) == {"worker:0", "ps:0"} and all(cluster.alive().values())
        names = our_namespaces(prefix)
        assert sorted(names) == sorted(f"{prefix}-{n}" for n in ["sw", "chief", "w0", "ps0"])
        assert cluster.chief_namespace == f"{prefix}-chief"
        # the PS serves on its own address, reachable from the chief's namespace
        ps_host, ps_port = spec.ps[0].split(":")
        probe = ("import socket; socket.create_connection"
                 f"(({ps_host!r}, {ps_port}), timeout=10).close()")
        subprocess.run(["ip", "netns", "exec", cluster.chief_namespace, sys.executable, "-c",
                        probe], check=True, timeout=30)
        assert set(cluster.link_bytes()) == {"chief:0", "worker:0", "ps:0"}
        assert cluster.link_bytes()["chief:0"].tx > 0
        cluster.kill_task("worker", 0)  # a crash mid-run
        assert cluster.alive() == {"worker:0": False, "ps:0": True}
    finally:
        cluster.stop()
    cluster.stop()  # idempotent
    assert our_namespaces(prefix) == []
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@needs_netns
def test_a_job_that_fails_on_a_shared_fabric_removes_only_its_own_hosts():
    with NetnsFabric(bandwidth=None, trunk_bandwidth="1gbit") as fabric:
        fabric.add_host("j1-w0")  # taken: the job's start() fails after adding its chief
        job = NetnsCluster(workers=1, ps=1, fabric=fabric, host_prefix="j1-")
        with pytest.raises(ClusterError, match="exists"):
            job.start()
        assert [h.name for h in fabric.hosts()] == ["j1-w0"]
        assert sorted(our_namespaces(fabric.prefix)) == [
            f"{fabric.prefix}-j1-w0",
            fabric.switch_namespace,
        ]
    assert our_namespaces(fabric.prefix) == []
