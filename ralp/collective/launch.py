"""Starting a collective job's workers on this machine: one process per worker, each with the
``TF_CONFIG`` that names the cluster and its own task, on free loopback ports.

The workers are started by this process and stopped by it, by process id: when one fails (or
the job runs past its time), the others are stopped at once, since a collective waits for every
worker and TensorFlow would only notice the loss at its next heartbeat.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ralp._process import stop_processes
from ralp.cluster.spec import free_ports
from ralp.collective.runtime import CollectiveError

STOP_GRACE_S = 5.0
POLL_S = 0.1


def tf_config(addresses: list[str], index: int) -> str:
    """The ``TF_CONFIG`` of worker ``index`` of a cluster of ``addresses``."""
    return json.dumps({"cluster": {"worker": list(addresses)},
                       "task": {"type": "worker", "index": index}})


@dataclass
class WorkerResult:
    index: int
    returncode: int
    output: str


def run_workers(command: list[str], workers: int, *, timeout: float = 600.0,
                env: dict[str, str] | None = None, host: str = "127.0.0.1",
                per_worker_env: list[dict[str, str]] | None = None) -> list[WorkerResult]:
    """Run ``command`` as ``workers`` workers of one collective job on ``host``, each with its
    ``TF_CONFIG`` (and ``per_worker_env[k]``, such as the GPU it sees), and return their
    results once all have exited with 0.

    Raises:
        CollectiveError: a worker failed (its last error line, and which), or the job took
            longer than ``timeout`` seconds; every worker is stopped first.
    """
    if workers < 1:
        raise CollectiveError(f"a collective job needs at least one worker, got {workers}")
    addresses = [f"{host}:{port}" for port in free_ports(workers, host)]
    return run_job([list(command)] * workers, addresses, timeout=timeout, env=env,
                   per_worker_env=per_worker_env)


def run_job(commands: list[list[str]], addresses: list[str], *, timeout: float = 600.0,
            env: dict[str, str] | None = None,
            on_line: Callable[[str], None] | None = None,
            per_worker_env: list[dict[str, str]] | None = None) -> list[WorkerResult]:
    """Run worker k as ``commands[k]`` with the ``TF_CONFIG`` of task k of ``addresses``;
    ``on_line`` gets worker 0's output lines as they come. The results once all exited with 0.

    Raises:
        CollectiveError: as :func:`run_workers`.
    """
    workers = len(commands)
    base = {**os.environ, **(env or {})}
    base.pop("TF_CONFIG", None)
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile("w+")) for _ in range(workers)]
        processes: list[subprocess.Popen] = []
        reader = None
        try:
            for k in range(workers):
                processes.append(subprocess.Popen(
                    commands[k], stdout=subprocess.PIPE if k == 0 else logs[k],
                    stderr=subprocess.STDOUT, start_new_session=True, text=True,
                    env={**base, **(per_worker_env[k] if per_worker_env else {}),
                         "TF_CONFIG": tf_config(addresses, k)}))
                if k == 0:
                    reader = threading.Thread(target=_forward, daemon=True,
                                              args=(processes[0].stdout, logs[0], on_line))
                    reader.start()
            failed = _wait(processes, timeout)
        finally:
            # each worker's whole session: TensorFlow starts no children, but a user's script may
            stop_processes(processes, STOP_GRACE_S, session=True)
            if reader is not None:
                reader.join(timeout=STOP_GRACE_S)
        outputs = []
        for log in logs:
            log.seek(0)
            outputs.append(log.read())
    results = [WorkerResult(k, p.returncode, out)
               for k, (p, out) in enumerate(zip(processes, outputs, strict=True))]
    if failed is None:
        raise CollectiveError(f"the collective job of {workers} workers did not finish in "
                              f"{timeout:.0f} s")
    if failed >= 0:
        result = results[failed]
        error = CollectiveError(f"worker {failed} {_exit_text(result.returncode)}: "
                                f"{last_error_line(result.output)}")
        error.worker = failed
        error.output = result.output  # the whole of it, for a report beyond the last line
        raise error
    return results


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with {code}"


def _forward(stream, log, on_line) -> None:
    for line in stream:
        log.write(line)
        if on_line is not None:
            on_line(line)
    stream.close()


def _wait(processes: list[subprocess.Popen], timeout: float) -> int | None:
    """-1 when every process exited with 0; the index of the first that failed; None when
    ``timeout`` passed first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        codes = [p.poll() for p in processes]
        for k, code in enumerate(codes):
            if code not in (None, 0):
                return k
        if all(code == 0 for code in codes):
            return -1
        time.sleep(POLL_S)
    return None


def last_error_line(output: str) -> str:
    """The last 'SomethingError: ...' line of a worker's output, else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception")) and " " not in head:
            return line[:300]
    return lines[-1][:300] if lines else "no output"


def launch(job_command: Callable[[object, object], list[str]], workers: int, backend: str, *,
           bandwidth: str | None = None, latency: str | None = None, budget=None,
           on_progress: Callable | None = None, timeout: float = 3600.0,
           env: dict[str, str] | None = None) -> dict:
    """Run a collective job of ``workers`` workers on ``backend`` ("local": loopback ports;
    "netns": one namespace per worker on a shaped bridge) and return worker 0's ``record``.

    ``job_command(links, cpu)`` is every worker's command: ``links`` reads the workers' link
    counters (netns; None elsewhere), ``cpu`` the device groups' counters where ``budget``
    gives each worker a control group of its own (joined before the worker runs anything).
    ``env`` adds to every worker's environment.

    Raises:
        CollectiveError: the job failed (the failing worker's error), or timed out.
    """
    from ralp._messages import parse_message

    if backend not in ("local", "netns"):
        raise CollectiveError(f"a collective job runs on the local or netns backend here, not "
                              f"{backend!r} (on a real cluster, start a worker per host with "
                              "its TF_CONFIG)")
    names = [f"worker:{k}" for k in range(workers)]
    hosts = [f"w{k}" for k in range(workers)]
    messages: dict = {}

    def on_line(line: str) -> None:
        message = parse_message(line)
        if message is None:
            return
        kind, value = next(iter(message.items()))
        if kind in ("record", "error"):
            messages.setdefault(kind, value)
        elif on_progress is not None:
            on_progress((kind, value))

    with contextlib.ExitStack() as stack:
        groups = stack.enter_context(budget.groups(hosts)) if budget is not None else None
        env = {**(budget.task_env() if groups is not None else {}), **(env or {})}
        meter = groups.meter(dict(zip(names, hosts, strict=True))) if groups else None

        def joined(k: int, command: list[str]) -> list[str]:
            return groups.group(hosts[k]).joined_command(command) if groups else command

        try:
            if backend == "netns":
                from ralp.emulation.counters import TaskLinks
                from ralp.emulation.fabric import NetnsFabric
                from ralp.emulation.iproute import in_namespace_command

                fabric = stack.enter_context(NetnsFabric(bandwidth, latency,
                                                         prefix=f"rlp{os.getpid()}c"))
                spots = [fabric.add_host(h) for h in hosts]
                links = TaskLinks(fabric.switch_namespace, tuple(
                    (name, s.name) for name, s in zip(names, spots, strict=True)))
                command = job_command(links, meter)
                commands = [joined(k, in_namespace_command(s.namespace, command))
                            for k, s in enumerate(spots)]
                addresses = [f"{s.address}:{WORKER_PORT}" for s in spots]
            else:
                command = job_command(None, meter)
                commands = [joined(k, command) for k in range(workers)]
                addresses = [f"127.0.0.1:{port}" for port in free_ports(workers)]
            run_job(commands, addresses, timeout=timeout, env=env, on_line=on_line)
        except CollectiveError as e:
            # worker 0's own error says most about its failure; another worker's loss is
            # named by the launcher (worker 0 only sees its collective fail)
            own = getattr(e, "worker", None) == 0 and messages.get("error")
            error = CollectiveError(own or str(e))
            error.worker = getattr(e, "worker", None)
            raise error from None
    if "record" not in messages:
        raise CollectiveError("the collective job ended without worker 0's record")
    return messages["record"]


WORKER_PORT = 2222  # every worker's own namespace: one port for all
