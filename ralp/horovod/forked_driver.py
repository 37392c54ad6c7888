"""The simulated cluster's Horovod driver forked from the zygote, not started afresh.

Every Horovod run on the netns backend has a driver (:mod:`ralp.horovod.netns_gloo`) that
imports TensorFlow, Keras and Horovod and then forks its ranks (:mod:`ralp.horovod.prefork`).
Started as ``python -m``, the driver paid a whole TensorFlow import before any rank existed:
7.6-8.2 s by the wall clock on a quiet 2-core host, once per Horovod or Stanza run. Forked
from the zygote (:mod:`ralp.cluster.zygote`, TensorFlow already imported, one thread) it only
imports Keras and Horovod.

The driver's stdout and stderr go to a pipe that the launcher reads as it read the
subprocess' (:func:`ralp.horovod.launch.run_and_collect`), and :class:`DriverProcess` answers
the ``subprocess.Popen`` calls the launcher makes. As with ``start_new_session``, the driver
leads a session of its own: Ctrl-C reaches the bench, which stops the run by pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys


class DriverProcess:
    """A forked driver as the launcher sees a ``subprocess.Popen``: ``pid``, ``stdout`` (text,
    line by line), ``poll``, ``wait``, ``send_signal`` and ``kill``."""

    def __init__(self, process, reader) -> None:
        self._process = process
        self.pid = process.pid
        self.stdout = os.fdopen(os.dup(reader.fileno()), "r", buffering=1, errors="replace")
        reader.close()

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired("the Horovod driver", timeout)
        return self._process.exitcode

    def send_signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start_forked_driver(argv: list[str], env: dict[str, str], group=None) -> DriverProcess | None:
    """``python -m ralp.horovod.netns_gloo ARGV`` as a child of the zygote, in ``group`` (a
    :class:`~ralp.emulation.devices.DeviceGroup`, joined first) with ``env`` as its whole
    environment; None where the zygote cannot start it (``RALP_START_METHOD=spawn``, or
    ``env`` asks for other import-time settings than the zygote has): start it afresh then."""
    import multiprocessing

    from ralp.cluster.zygote import context, start_process

    ctx = context(env)
    if ctx is not multiprocessing.get_context("forkserver"):
        return None
    reader, writer = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_driver_main,
                          args=(writer, argv, env, os.getcwd(), group, os.getpid()),
                          daemon=True, name="ralp-horovod-driver")
    try:
        start_process(process)
    finally:
        writer.close()
    return DriverProcess(process, reader)


def _driver_main(writer, argv: list[str], env: dict[str, str], cwd: str, group,
                 launcher_pid: int) -> None:
    os.setsid()  # Ctrl-C goes to the bench, which stops this run by pid
    if group is not None:  # first: the driver's CPU is counted in its group
        group.join()
    os.dup2(writer.fileno(), 1)
    os.dup2(writer.fileno(), 2)
    writer.close()
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    # As a fresh interpreter would have them: $PYTHONPATH's folders first on the path (the
    # zygote's path is the bench's at its start), where the ranks' modules may live.
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    sys.path[:0] = extra
    from ralp.horovod.netns_gloo import main

    sys.exit(main(argv, launcher_pid=launcher_pid))
