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
import time
from dataclasses import dataclass

from ralp.cluster.spec import free_ports
from ralp.collective.trainer import CollectiveError

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
                env: dict[str, str] | None = None, host: str = "127.0.0.1") -> list[WorkerResult]:
    """Run ``command`` as ``workers`` workers of one collective job on ``host``, each with its
    ``TF_CONFIG``, and return their results once all have exited with 0.

    Raises:
        CollectiveError: a worker failed (its last error line, and which), or the job took
            longer than ``timeout`` seconds; every worker is stopped first.
    """
    if workers < 1:
        raise CollectiveError(f"a collective job needs at least one worker, got {workers}")
    addresses = [f"{host}:{port}" for port in free_ports(workers, host)]
    base = {**os.environ, **(env or {})}
    base.pop("TF_CONFIG", None)
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile("w+")) for _ in range(workers)]
        processes: list[subprocess.Popen] = []
        try:
            for k in range(workers):
                processes.append(subprocess.Popen(
                    command, stdout=logs[k], stderr=subprocess.STDOUT, start_new_session=True,
                    env={**base, "TF_CONFIG": tf_config(addresses, k)}))
            failed = _wait(processes, timeout)
        finally:
            _stop(processes)
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
        raise CollectiveError(f"worker {failed} exited with {result.returncode}: "
                              f"{last_error_line(result.output)}")
    return results


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


def _stop(processes: list[subprocess.Popen]) -> None:
    """Stop every worker still running (its whole session: TensorFlow starts no children, but a
    user's script may), SIGTERM then SIGKILL."""
    for p in processes:
        _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for p in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        if p.poll() is None:
            _signal_group(p, signal.SIGKILL)
            p.wait()


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)


def last_error_line(output: str) -> str:
    """The last 'SomethingError: ...' line of a worker's output, else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception")) and " " not in head:
            return line[:300]
    return lines[-1][:300] if lines else "no output"
