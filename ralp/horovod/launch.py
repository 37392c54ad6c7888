"""Starting a Horovod job (Gloo, CPU) on each backend, and reading its rank 0's messages.

- ``local``: ``horovodrun -np W -H localhost:W --gloo --network-interface lo``, ranks on
  loopback (bytes predicted only, as for the PS modes).
- ``netns``: one network namespace per rank on a shaped bridge (like the PS modes' tasks),
  plus one for the driver; :mod:`ralp.horovod.netns_gloo` runs Horovod's Gloo launcher with
  ``ip netns exec`` in place of ssh. The driver is forked from the zygote
  (:mod:`ralp.horovod.forked_driver`). Bytes are read from each rank's link counters.
- ``hostfile``: a real cluster, ``horovodrun -np W --hostfile FILE --gloo`` (ssh to each host,
  as ``horovodrun`` does; ralp and the same Python must be installed at the same path there).

The job prints marker lines (:mod:`ralp._messages`); everything the launcher
started is stopped when it ends, also on errors, Ctrl-C and timeouts.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from ralp._messages import parse_message
from ralp.emulation.budget import Budget
from ralp.emulation.counters import TaskLinks
from ralp.emulation.cpu_meter import DeviceMeter
from ralp.emulation.devices import RANK_GROUPS_ENV
from ralp.errors import RalpError

STOP_GRACE_S = 10.0


class HorovodRunError(RalpError, RuntimeError):
    """A Horovod job failed; the message says how (the failing rank's error when known)."""


def horovodrun_path() -> str | None:
    """The ``horovodrun`` of this Python's environment (not whatever PATH finds first)."""
    beside = Path(sys.executable).with_name("horovodrun")
    if beside.exists():
        return str(beside)
    return shutil.which("horovodrun")


def horovod_unavailable_reason() -> str | None:
    """Why Horovod cannot run here, or None. (Does not import TensorFlow.)"""
    if importlib.util.find_spec("horovod") is None:
        return ("Horovod is not installed in this environment: run ./scripts/setup.sh (it builds "
                "and caches Horovod 0.28.1 with Gloo), or scripts/build_horovod.sh")
    if horovodrun_path() is None:
        return "Horovod is installed but its horovodrun command is missing: reinstall it with " \
               "scripts/build_horovod.sh --rebuild"
    return None


def horovodrun_command(workers: int, rank_command: list[str], hostfile: str | None = None):
    """``horovodrun`` with Gloo on ``workers`` local slots, or on the hosts of ``hostfile``."""
    run = horovodrun_path() or "horovodrun"
    if hostfile:
        return [run, "-np", str(workers), "--hostfile", hostfile, "--gloo", *rank_command]
    return [run, "-np", str(workers), "-H", f"localhost:{workers}", "--gloo",
            "--network-interface", "lo", *rank_command]


def launch(
    rank_command: Callable[[TaskLinks | None, DeviceMeter | None], list[str]],
    workers: int,
    backend: str,
    *,
    bandwidth: str | None = None,
    latency: str | None = None,
    hostfile: str | None = None,
    on_progress: Callable | None = None,
    timeout: float = 3600.0,
    fc_ranks: int = 0,
    budget: Budget | None = None,
    env: dict[str, str] | None = None,
) -> dict:
    """Run a Horovod job of ``workers`` + ``fc_ranks`` ranks on ``backend`` and return rank
    0's ``record``.

    ``rank_command(links, cpu)`` is the command every rank runs; ``links`` reads the ranks'
    link counters on the netns backend (None elsewhere): ``worker:k`` for the first
    ``workers`` ranks, ``ps:g`` for the last ``fc_ranks`` (Stanza's FC ranks). With a
    ``budget`` (local and netns), every rank runs in a control group of its own
    (:mod:`ralp.emulation.devices`), joined before it runs anything of the job, and the
    launcher in one that only counts; ``cpu`` reads their counters (the same task names, and
    ``driver``). ``env`` adds to every rank's environment. Raises :class:`HorovodRunError`.
    """
    reason = horovod_unavailable_reason()
    if reason:
        raise HorovodRunError(reason)
    if backend not in ("netns", "local", "tf-config"):
        raise HorovodRunError(f"Horovod cannot run on backend {backend!r}")
    if backend == "tf-config" and not hostfile:
        raise HorovodRunError("Horovod on a real cluster needs its hosts: pass "
                              "--hostfile FILE (horovodrun's format, 'host slots=N' lines)")
    names = [f"worker:{k}" for k in range(workers)] + [f"ps:{g}" for g in range(fc_ranks)]
    hosts = [f"w{k}" for k in range(len(names))]  # the ranks' hosts and device groups
    groups_of = budget.groups(hosts, [DRIVER]) if budget and backend != "tf-config" else None
    with groups_of or contextlib.nullcontext() as groups:
        env, driver_group, meter = {**os.environ, **(env or {})}, None, None
        if groups is not None:
            env.update(budget.task_env())
            env[RANK_GROUPS_ENV] = json.dumps([list(groups.group(h).dirs) for h in hosts])
            driver_group = groups.group(DRIVER)
            meter = groups.meter({**dict(zip(names, hosts, strict=True)), DRIVER: DRIVER})
        if backend == "netns":
            return _run_on_netns(rank_command, names, bandwidth, latency, on_progress, timeout,
                                 env, driver_group, meter)
        command = horovodrun_command(len(names), rank_command(None, meter), hostfile)
        return collect(_popen(command, env, driver_group), on_progress, timeout)


DRIVER = "driver"  # the launcher's host and control group (it only counts, unlimited)


def _run_on_netns(rank_command, link_names, bandwidth, latency, on_progress, timeout, env,
                  driver_group, meter) -> dict:
    from ralp.emulation.fabric import NetnsFabric
    from ralp.horovod.forked_driver import start_forked_driver

    prefix = f"rlp{os.getpid()}h"
    with NetnsFabric(bandwidth, latency, prefix=prefix) as fabric:
        driver = fabric.add_host(DRIVER)
        hosts = [fabric.add_host(f"w{k}") for k in range(len(link_names))]
        links = TaskLinks(fabric.switch_namespace,
                          tuple((name, h.name) for name, h in zip(link_names, hosts, strict=True)))
        # The driver enters its namespace itself: `ip netns exec` would also remount /sys,
        # hiding the control groups its forked ranks join.
        argv = ["--netns", driver.namespace, "--iface", "eth0", "--driver-ip", driver.address,
                "--hosts", ",".join(f"{h.address}={h.namespace}" for h in hosts),
                "--", *rank_command(links, meter)]
        try:
            # Forked from the zygote where it can be (no TensorFlow import of its own), else
            # started afresh inside its group.
            process = start_forked_driver(argv, env, driver_group) or _popen(
                [sys.executable, "-m", "ralp.horovod.netns_gloo", *argv], env, driver_group)
            return collect(process, on_progress, timeout)
        finally:
            # Anything still inside the run's namespaces was started by this run: stop it by
            # pid before the namespaces go (a process would keep a deleted namespace alive).
            _kill_pids(_namespace_pids([driver.namespace, *(h.namespace for h in hosts)]))


def run_and_collect(command: list[str], on_progress: Callable | None, timeout: float,
                    env: dict[str, str] | None = None) -> dict:
    """Run a Horovod launcher command; forward progress; return rank 0's record."""
    return collect(_popen(command, env), on_progress, timeout)


def _popen(command: list[str], env: dict[str, str] | None, group=None) -> subprocess.Popen:
    """The launcher started afresh, inside ``group`` (its control group) where one is given."""
    if group is not None:
        command = group.joined_command(command)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1, start_new_session=True, env=env)


def collect(process, on_progress: Callable | None, timeout: float) -> dict:
    """Read a started launcher's output (a ``subprocess.Popen``, or a forked driver with the
    same calls); forward progress; return rank 0's record. The launcher and everything it
    started are stopped before this returns."""
    tail: collections.deque[str] = collections.deque(maxlen=60)
    record = error = None
    # A job that hangs prints nothing: a timer stops it, which ends the output loop.
    timed_out = threading.Event()

    def stop_on_timeout() -> None:
        timed_out.set()
        _signal(process, signal.SIGTERM)

    timer = threading.Timer(timeout, stop_on_timeout)
    timer.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            message = parse_message(line)
            if message is None:
                tail.append(line.rstrip())
            elif "record" in message:
                record = message["record"]
            elif "error" in message:
                error = error or message["error"]
            elif on_progress is not None:
                kind, value = next(iter(message.items()))
                on_progress((kind, value))
        code = process.wait()
    finally:
        timer.cancel()
        stop_process_tree(process)
    if record is not None and code == 0:
        return record
    if timed_out.is_set():
        raise HorovodRunError(f"the Horovod job did not finish in {timeout:.0f} s")
    raise HorovodRunError(error or _last_error_line(tail) or f"the Horovod job exited with {code}")


def stop_process_tree(process) -> None:
    """Stop the launcher and every process it started, by pid: SIGTERM to the launcher first
    (horovodrun then stops its ranks itself), SIGKILL to whatever is left after a grace period."""
    import psutil  # a Horovod dependency

    try:
        family = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    if process.poll() is None:
        _signal(process, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    _, alive = psutil.wait_procs(family, timeout=STOP_GRACE_S if family else 0)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    if process.stdout is not None:
        process.stdout.close()


def _signal(process, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        if process.poll() is None:
            process.send_signal(signum)


def _namespace_pids(namespaces: list[str]) -> list[int]:
    pids = []
    for ns in namespaces:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        pids += [int(p) for p in out.stdout.split() if p.isdigit()]
    return pids


def _kill_pids(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _last_error_line(lines) -> str | None:
    """The job's error in one line, without Horovod's prefix, most telling first: a rank's
    own Python error ('SomethingError: ...' in lines horovodrun prefixes with
    ``[rank]<stderr>:``); else the first rank the launcher saw exit non-zero, its status and
    the C++ exception that aborted it if one did (Gloo's "connection closed" names the peer
    that left first); else any rank's C++ abort; else the launcher's own error line."""
    lines = list(lines)
    from_ranks = [line for line in lines if "]<stderr>:" in line or "]<stdout>:" in line]
    return (_python_error(from_ranks) or _first_exit(lines, from_ranks)
            or _rank_aborted(from_ranks) or _python_error(lines)
            or next((line.split(">:", 1)[-1].strip()[:300] for line in reversed(lines)
                     if line.strip()), None))


def _python_error(lines: list[str]) -> str | None:
    for line in reversed(lines):
        text = line.split(">:", 1)[-1].strip()
        head = text.split(":", 1)[0]
        if head.endswith(("Error", "Exception")) and " " not in head:
            return text[:300]
    return None


def _first_exit(lines: list[str], from_ranks: list[str]) -> str | None:
    """'rank N exited with status S', with the C++ exception that aborted it if one did, for
    the first rank the launcher saw exit non-zero: as the netns driver says it ("rank 7
    exited with status -6: ...") or horovodrun ("Process name: 7", "Exit code: -6")."""
    for line, after in itertools.zip_longest(lines, lines[1:], fillvalue=""):
        said = re.match(r"rank (\d+) exited with status (-?\d+)", line.strip())
        name = re.match(r"Process name: (\S+)$", line.strip())
        code = re.match(r"Exit code: (-?\d+)$", after.strip())
        if said or (name and code):
            rank, status = said.groups() if said else (name.group(1), code.group(1))
            aborted = _rank_aborted(from_ranks, rank)
            return (f"rank {rank} exited with status {status}"
                    + (f" ({aborted})" if aborted else ""))[:300]
    return None


def _rank_aborted(lines: list[str], rank: str | None = None) -> str | None:
    """A rank (``rank``, else any) ended by std::terminate: 'rank N aborted: <its what()>'."""
    for line in reversed(lines):
        text = line.split(">:", 1)[-1].strip()
        at = line.split("]", 1)[0].lstrip("[")
        if text.startswith("what():") and rank in (None, at):
            return f"rank {at} aborted: {text[len('what():'):].strip()}"[:300]
    return None
