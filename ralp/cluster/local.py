"""The local launcher: PS and worker tasks as real gRPC server processes on this machine.

``LocalCluster`` starts every PS and worker task as its own server process (the code of
``python -m ralp.server``, forked from the zygote of :mod:`ralp.cluster.zygote`, so that
starting one does not import TensorFlow again) on loopback ports that are free (chosen
again if another program takes one before its task binds it), waits until each serves, and
stops them (by process id, never by name) when the ``with`` block ends, also on exceptions
and Ctrl-C. Each task also watches the launching process and exits if it
disappears, so a killed run leaves nothing behind. A task may run inside a network namespace
(``task_netns``) and in a device's control group (``task_groups``, its CPU budget): the
simulated cluster's tasks do.

A lost task can be started again at its address (``restart_task``), and with
``restart_lost=True`` the cluster does that by itself, as a supervisor such as Kubernetes
does: that is how training survives a lost PS (``fit(checkpoint_dir=...)`` waits for the
restarted task and goes on from its last checkpoint).

The coordinator (chief) is not started here: under ``ParameterServerStrategy`` it changes the
process-global eager context, so each training job runs it in a fresh process of its own.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ralp.cluster.spec import ClusterError, ClusterSpec, local_spec
from ralp.cluster.task_server import EXIT_PORT_BUSY, serve_task
from ralp.cluster.zygote import context, start_process

PORT_ATTEMPTS = 3  # starts of a cluster on loopback ports of its own choosing


@dataclass
class _Task:
    job: str
    index: int
    process: object  # a multiprocessing Process
    log: Path


class LocalCluster:
    """PS and worker tasks as local server processes, for tests and the local bench backend.

    The tasks' logs go to ``log_dir``; without one, to a temporary directory that ``stop``
    removes (kept when the start failed: its error may name it).

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
        task_netns: Mapping[str, str] | None = None,
        task_groups: Mapping[str, object] | None = None,
        device_type: str = "cpu",
        restart_lost: bool = False,
        restart_delay: float = 0.0,
    ):
        if device_type not in ("cpu", "gpu"):
            raise ClusterError(f"device_type must be 'cpu' or 'gpu', got {device_type!r}")
        self._own_spec = spec is None  # ports of its own choosing: it may choose again
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
        self.task_netns = dict(task_netns or {})  # "ps:0" -> the network namespace it runs in
        # "ps:0" -> its device's control group (ralp.emulation.devices.DeviceGroup): its budget
        self.task_groups = dict(task_groups or {})
        self.device_type = device_type  # gpu: each task may use the GPUs its env lets it see
        self._tasks: list[_Task] = []
        self.restarts: dict[str, int] = {}  # "ps:0" -> how many times it was restarted
        # A supervisor, as Kubernetes' restart policy: a task that exits is started again
        # after restart_delay seconds (restart_lost=True), until stop().
        self.restart_lost, self.restart_delay = restart_lost, restart_delay
        self.started_pids: list[int] = []  # every task process ever started, restarts included
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ClusterSpec:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for attempt in range(1, PORT_ATTEMPTS + 1):
                for job, index, _ in self.spec.tasks():
                    self._launch(job, index)
                try:
                    self._wait_ready(self._tasks)
                    break
                except ClusterError:
                    if not (self._own_spec and attempt < PORT_ATTEMPTS and self._port_taken()):
                        raise
                    self._start_over_on_new_ports()
        except BaseException as e:
            if isinstance(e, Exception):  # the error may point at the tasks' logs: kept
                self._own_log_dir = False
            self.stop()
            raise
        if self.restart_lost:
            self._supervisor = threading.Thread(target=self._supervise, daemon=True,
                                                name="ralp-cluster-supervisor")
            self._supervisor.start()
        return self.spec

    def _supervise(self) -> None:
        """Restart every task that exits, after ``restart_delay`` seconds, until stop()."""
        while not self._stopping.wait(0.1):
            with self._lock:
                lost = [(t.job, t.index) for t in self._tasks if t.process.exitcode is not None]
            for job, index in lost:
                if self._stopping.wait(self.restart_delay):
                    return
                with self._lock:
                    if self._stopping.is_set():
                        return
                    try:
                        self.restart_task(job, index)
                    except ClusterError as e:  # it failed to start: try again next round
                        print(f"ralp: could not restart {job}:{index}: {e}", file=sys.stderr)

    def _port_taken(self) -> bool:
        return any(t.process.exitcode == EXIT_PORT_BUSY for t in self._tasks)

    def _start_over_on_new_ports(self) -> None:
        """A loopback port picked as free was taken before its task bound it (by another
        program, or as the local end of an outgoing connection): pick new ports, start again."""
        self._stop_tasks(timeout=10.0)
        for log in self.log_dir.glob("*.log"):
            log.unlink()
        self.spec = local_spec(len(self.spec.workers), len(self.spec.ps))

    def _launch(self, job: str, index: int, slot: int | None = None) -> _Task:
        """Start ``job:index`` and put it in ``self._tasks`` (at ``slot``, else at the end)."""
        task = f"{job}:{index}"
        env = {"TF_CPP_MIN_LOG_LEVEL": "2", **self.env, **self.task_env.get(task, {})}
        log = self.log_dir / f"{job}{index}.log"
        ctx = context(env)
        process = ctx.Process(
            target=serve_task, name=f"ralp-{job}{index}", daemon=True,
            args=(self.spec, job, index, self.device_type, os.getpid(), str(log), env,
                  self.task_netns.get(task), self.task_groups.get(task)),
        )
        launched = _Task(job, index, process, log)
        try:
            start_process(process)  # an interrupt waits until its pid is known...
        finally:
            if process.pid is not None:  # ...and the task is listed first, so stop() finds it
                self.started_pids.append(process.pid)
                if slot is None:
                    self._tasks.append(launched)
                else:
                    self._tasks[slot] = launched
        return launched

    def _wait_ready(self, tasks: list[_Task], timeout: float | None = None) -> None:
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        pending = list(tasks)
        while pending:
            for task in list(pending):
                text = task.log.read_text(errors="replace") if task.log.exists() else ""
                if "RALP_SERVER_READY" in text:
                    pending.remove(task)
                elif task.process.exitcode is not None:
                    raise ClusterError(
                        f"{task.job} task {task.index} ({self.spec.address(task.job, task.index)}) "
                        f"exited with code {task.process.exitcode} while starting:\n"
                        + _tail(text)
                    )
            if pending and time.monotonic() > deadline:
                names = ", ".join(f"{t.job}:{t.index}" for t in pending)
                raise ClusterError(f"tasks {names} did not start within {timeout:.0f} s; "
                                   f"logs in {self.log_dir}")
            time.sleep(0.1)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every task this cluster started (SIGTERM, then SIGKILL), by process id."""
        self._stopping.set()
        if self._supervisor is not None and self._supervisor is not threading.current_thread():
            self._supervisor.join()
        with self._lock:
            self._stop_tasks(timeout)
        if self._own_log_dir:  # the temporary directory of the tasks' logs goes with them
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def _stop_tasks(self, timeout: float) -> None:
        for task in self._tasks:
            if task.process.exitcode is None:
                task.process.terminate()
        deadline = time.monotonic() + timeout
        for task in self._tasks:
            task.process.join(timeout=max(0.1, deadline - time.monotonic()))
            if task.process.exitcode is None:
                task.process.kill()
                task.process.join()
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
        return {f"{t.job}:{t.index}": t.process.exitcode is None for t in self._tasks}

    def kill_task(self, job: str, index: int) -> None:
        """Kill one task abruptly (SIGKILL), as a crash would."""
        with self._lock:
            for task in self._tasks:
                if (task.job, task.index) == (job, index):
                    task.process.kill()
                    task.process.join()
                    return
        raise ClusterError(f"no running task {job}:{index}")

    def restart_task(self, job: str, index: int, timeout: float | None = None) -> None:
        """Start a lost task again at its address, as a supervisor such as Kubernetes would,
        and wait until it serves. The new server is empty: a PS' variables are gone. The lost
        task's log is kept as ``<job><index>.lost<n>.log``."""
        with self._lock:
            for k, task in enumerate(self._tasks):
                if (task.job, task.index) == (job, index):
                    if task.process.exitcode is None:
                        raise ClusterError(f"task {job}:{index} is still running; kill it first")
                    n = self.restarts[f"{job}:{index}"] = self.restarts.get(f"{job}:{index}", 0) + 1
                    if task.log.exists():
                        task.log.rename(task.log.with_name(f"{job}{index}.lost{n}.log"))
                    self._launch(job, index, slot=k)
                    self._wait_ready([self._tasks[k]], timeout)
                    return
        raise ClusterError(f"no task {job}:{index} in this cluster")

    def log_text(self, job: str, index: int) -> str:
        return (self.log_dir / f"{job}{index}.log").read_text(errors="replace")


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines()[-lines:])
