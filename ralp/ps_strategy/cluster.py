"""Cluster specs and the local launcher: PS and worker tasks as real gRPC server processes.

``LocalCluster`` starts every PS and worker task as its own ``python -m ralp.server`` process
on loopback ports that are free, waits until each serves, and stops them (by process id, never
by name) when the ``with`` block ends, also on exceptions and Ctrl-C. Each task also watches
the launching process and exits if it disappears, so a killed run leaves nothing behind.

The coordinator (chief) is not started here: under ``ParameterServerStrategy`` it changes the
process-global eager context, so each training job runs it in a fresh process of its own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

JOBS = ("chief", "worker", "ps")
_ADDRESS = re.compile(r"^(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>\d{1,5})$")


class ClusterError(RuntimeError):
    """The cluster is misconfigured, did not start, or became unreachable."""


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
        unknown = set(cluster) - set(JOBS)
        if unknown:
            raise ClusterError(f"unknown job(s) {sorted(unknown)} in the cluster; use {list(JOBS)}")
        chief = cluster.get("chief")
        if not chief or not isinstance(chief, list | tuple) or len(chief) != 1:
            raise ClusterError("the cluster needs exactly one 'chief' address (where the "
                               "coordinator runs), e.g. \"chief\": [\"host0:2222\"]")  # fmt: skip
        for job in ("worker", "ps"):
            if not isinstance(cluster.get(job, []), list | tuple):
                raise ClusterError(f"'{job}' must be a list of host:port addresses")
        return cls(chief[0], tuple(cluster.get("worker", ())), tuple(cluster.get("ps", ())))

    @classmethod
    def from_tf_config(cls, text: str | None) -> tuple[ClusterSpec, str, int]:
        """Parse ``TF_CONFIG``: the cluster and this process' task type and index."""
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


@dataclass
class _Task:
    job: str
    index: int
    process: subprocess.Popen
    log: Path


class LocalCluster:
    """PS and worker tasks as local server processes, for tests and the local bench backend.

    >>> with LocalCluster(workers=2, ps=1) as cluster:  # doctest: +SKIP
    ...     run_job(cluster.spec)  # in a fresh process: the coordinator connects to the spec
    """

    def __init__(
        self,
        workers: int = 1,
        ps: int = 1,
        *,
        spec: ClusterSpec | None = None,
        start_timeout: float = 60.0,
        log_dir: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        task_env: Mapping[str, Mapping[str, str]] | None = None,
        command_prefix: Mapping[str, list[str]] | None = None,
        device_type: str = "cpu",
    ):
        if device_type not in ("cpu", "gpu"):
            raise ClusterError(f"device_type must be 'cpu' or 'gpu', got {device_type!r}")
        if spec is None:
            if workers < 1 or ps < 1:
                raise ClusterError(
                    f"need at least one worker and one PS task, got {workers} and {ps}"
                )
            spec = local_spec(workers, ps)
        self.spec = spec
        self.start_timeout = start_timeout
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="ralp-cluster-"))
        self.env = dict(env or {})
        self.task_env = {k: dict(v) for k, v in (task_env or {}).items()}  # "worker:0" -> env
        self.command_prefix = dict(
            command_prefix or {}
        )  # "ps:0" -> e.g. ["ip", "netns", "exec", ...]
        self.device_type = device_type  # gpu: each task may use the GPUs its env lets it see
        self._tasks: list[_Task] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ClusterSpec:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for job, index, _ in self.spec.tasks():
                self._tasks.append(self._launch(job, index))
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.spec

    def _launch(self, job: str, index: int) -> _Task:
        env = dict(os.environ)
        env.update(self.env)
        env.update(self.task_env.get(f"{job}:{index}", {}))
        env["TF_CONFIG"] = self.spec.tf_config(job, index)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        log = self.log_dir / f"{job}{index}.log"
        cmd = [*self.command_prefix.get(f"{job}:{index}", []), sys.executable, "-m",
               "ralp.server", "--parent-pid", str(os.getpid()),
               "--device-type", self.device_type]  # fmt: skip
        with open(log, "wb") as out:
            process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                       stdin=subprocess.DEVNULL)  # fmt: skip
        return _Task(job, index, process, log)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        pending = list(self._tasks)
        while pending:
            for task in list(pending):
                text = task.log.read_text(errors="replace") if task.log.exists() else ""
                if "RALP_SERVER_READY" in text:
                    pending.remove(task)
                elif task.process.poll() is not None:
                    raise ClusterError(
                        f"{task.job} task {task.index} ({self.spec.address(task.job, task.index)}) "
                        f"exited with code {task.process.returncode} while starting:\n"
                        + _tail(text)
                    )
            if pending and time.monotonic() > deadline:
                names = ", ".join(f"{t.job}:{t.index}" for t in pending)
                raise ClusterError(f"tasks {names} did not start within {self.start_timeout:.0f} s; "
                                   f"logs in {self.log_dir}")  # fmt: skip
            time.sleep(0.1)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every task this cluster started (SIGTERM, then SIGKILL), by process id."""
        for task in self._tasks:
            if task.process.poll() is None:
                task.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for task in self._tasks:
            try:
                task.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                task.process.kill()
                task.process.wait()
        self._tasks.clear()

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ inspection

    @property
    def pids(self) -> dict[str, int]:
        return {f"{t.job}:{t.index}": t.process.pid for t in self._tasks}

    def alive(self) -> dict[str, bool]:
        return {f"{t.job}:{t.index}": t.process.poll() is None for t in self._tasks}

    def kill_task(self, job: str, index: int) -> None:
        """Kill one task abruptly (SIGKILL), as a crash would."""
        for task in self._tasks:
            if (task.job, task.index) == (job, index):
                task.process.kill()
                task.process.wait()
                return
        raise ClusterError(f"no running task {job}:{index}")

    def log_text(self, job: str, index: int) -> str:
        return (self.log_dir / f"{job}{index}.log").read_text(errors="replace")


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines()[-lines:])
