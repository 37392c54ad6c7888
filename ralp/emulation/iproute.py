"""Network namespaces through iproute2: run ``ip``/``tc``, check they work here, enter one,
delete them, and sweep what runs that were killed outright left behind."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import shutil
import subprocess

from ralp._process import owner_gone
from ralp.errors import ClusterError

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"  # where `ip netns` keeps its named namespaces
# namespaces this project creates: rlp<launcher pid>-..., and the Horovod and collective
# launchers' rlp<pid>h-... and rlp<pid>c-... (a SIGKILLed Horovod run left its own behind)
_STALE = re.compile(r"^rlp(\d+)[hc]?-")


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


def run_command(command: str) -> str:
    """Run one `ip`/`tc` command line; every word in it is a validated name, so split() is safe."""
    done = subprocess.run(command.split(), capture_output=True, text=True)
    if done.returncode != 0:
        raise ClusterError(f"`{command}` failed: {done.stderr.strip()}")
    return done.stdout


def delete_namespaces(names: list[str]) -> None:
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


def sweep_stale() -> list[str]:
    """Delete namespaces of runs whose launcher is dead (SIGKILLed runs leave theirs)."""
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    stale = []
    for name in names:
        m = _STALE.match(name)
        pid = int(m[1]) if m else 0
        if owner_gone(pid):  # a zombie owner has ended too
            stale.append(name)
    # switch namespaces last, like close(): hosts first
    stale.sort(key=lambda name: name.endswith("-sw"))
    delete_namespaces(stale)
    return stale


def enter_namespace(namespace: str) -> None:
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




def in_namespace_command(namespace: str, command: list[str]) -> list[str]:
    """``command`` run in a named network namespace without remounting /sys (``nsenter``, of
    util-linux), unlike ``ip netns exec``: the task still sees the control groups it reads
    its device's CPU counters from."""
    if "/" in namespace or namespace in ("", ".", ".."):
        raise ClusterError(f"{namespace!r} is not a network namespace name")
    return ["nsenter", f"--net={os.path.join(NETNS_DIR, namespace)}", "--", *command]
