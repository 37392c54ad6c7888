"""Horovod ranks forked from their driver once TensorFlow is imported, not started afresh.

On a simulated cluster every rank is a process on this machine, and each one used to start
with its own ``import tensorflow, keras, horovod.tensorflow``: four ranks importing at once on
2 cores took 10-15 s before ``hvd.init`` (the ``rank_start`` of every Horovod bench record),
the largest fixed cost of a Horovod run. The netns driver (:mod:`ralp.horovod.netns_gloo`)
imports them once instead (:data:`PRELOAD`), forks one child per rank *before* it starts any
thread (the zygote rule of :mod:`ralp.cluster.zygote`: a process that has only imported
TensorFlow, single-threaded, forks safely), and then lets Horovod's own Gloo launcher run as
before: its rendezvous server, per-rank environment and stop-all-on-failure are unchanged. What
the launcher would have run as ``env K=V ... python -m MODULE ARGS`` is handed to the rank's
child instead, which enters the rank's network namespace, applies the environment and runs
``MODULE`` as ``__main__``. Its output is forwarded with horovodrun's ``[rank]<stdout>:``
prefixes.

Only ``python -m MODULE`` commands are forked; anything else, or ``RALP_START_METHOD=spawn``,
runs the old way (:func:`ralp.horovod.netns_gloo.netns_exec_command`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
import threading
import time
from dataclasses import dataclass

from ralp.cluster.zygote import PRELOAD as ZYGOTE_PRELOAD

PRELOAD = (ZYGOTE_PRELOAD, "keras", "horovod.tensorflow")  # the zygote's, and the ranks' own
STOP_GRACE_S = 5.0  # a rank asked to stop gets this long before SIGKILL


def python_module(command: list[str]) -> str | None:
    """``MODULE`` if ``command`` is ``PYTHON -m MODULE ...`` (any Python), else None."""
    if len(command) >= 3 and "python" in os.path.basename(command[0]) and command[1] == "-m":
        return command[2]
    return None


def split_env_command(command: str) -> tuple[dict[str, str], list[str]]:
    """``env K=V ... PROGRAM ARGS`` (the launcher's command line) -> ({K: V}, [PROGRAM, ARGS])."""
    words = shlex.split(command)
    if words[:1] == ["env"]:
        words = words[1:]
    env = {}
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return env, words


def rank_finished(rank: int, code: int, terminate_all: threading.Event) -> tuple[int, float]:
    """What an ``exec_command`` returns to ``launch_gloo`` when a rank ends; a rank that failed
    stops the others first (horovodrun's rule), saying so once."""
    if code != 0:
        if not terminate_all.is_set():
            print(f"rank {rank} exited with status {code}: stopping the others", flush=True)
        terminate_all.set()
    return code, time.time()


def forking_wanted(command: list[str]) -> bool:
    return os.environ.get("RALP_START_METHOD") != "spawn" and python_module(command) is not None


@dataclass
class _Child:
    pid: int
    command_fd: int  # the driver writes the rank's command here, once
    stdout_fd: int
    stderr_fd: int


class PreforkedRanks:
    """``count`` children forked now from this (preloaded, single-threaded) process, each
    waiting for the one rank command it will run."""

    def __init__(self, count: int, namespace_of: dict[str, str], preload: bool = True):
        import importlib

        self.namespace_of = namespace_of  # Horovod host -> its network namespace
        if preload:
            for module in PRELOAD:
                importlib.import_module(module)
        if threading.active_count() != 1:
            raise RuntimeError("the Horovod driver has threads before it forks its ranks")
        sys.stdout.flush()
        sys.stderr.flush()
        self.children: list[_Child] = []
        for _ in range(count):
            command_r, command_w = os.pipe()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the rank's child: never returns
                for c in self.children:
                    for fd in (c.command_fd, c.stdout_fd, c.stderr_fd):
                        os.close(fd)
                for fd in (command_w, out_r, err_r):
                    os.close(fd)
                _run_rank(command_r, out_w, err_w)
            for fd in (command_r, out_w, err_w):
                os.close(fd)
            self.children.append(_Child(pid, command_w, out_r, err_r))

    def exec_command(self, terminate_all: threading.Event):
        """An ``exec_command`` for ``launch_gloo``: the rank's command goes to its child."""

        def exec_command(command: str, slot_info, events):
            child = self.children[slot_info.rank]
            env, words = split_env_command(command)
            call = {"env": env, "module": python_module(words), "argv": words[3:],
                    "cwd": os.getcwd(), "namespace": self.namespace_of[slot_info.hostname]}
            with os.fdopen(child.command_fd, "w") as f:
                f.write(json.dumps(call))
            forwarders = [
                threading.Thread(target=_forward, args=(fd, f"[{slot_info.rank}]<{name}>:"),
                                 daemon=True)
                for fd, name in ((child.stdout_fd, "stdout"), (child.stderr_fd, "stderr"))
            ]
            for t in forwarders:
                t.start()
            code = _wait(child.pid, [*(events or []), terminate_all])
            for t in forwarders:
                t.join(timeout=STOP_GRACE_S)
            return rank_finished(slot_info.rank, code, terminate_all)

        return exec_command

    def stop(self) -> None:
        """Kill any child still running (a rank whose command never came, or still runs)."""
        for c in self.children:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(c.pid, signal.SIGKILL)
                os.waitpid(c.pid, 0)


def _run_rank(command_fd: int, stdout_fd: int, stderr_fd: int) -> None:
    code = 1
    try:
        with os.fdopen(command_fd) as f:
            text = f.read()
        if not text:  # the driver stopped before this rank started
            os._exit(0)
        call = json.loads(text)
        os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        from ralp.emulation.devices import join_rank_group
        from ralp.emulation.iproute import enter_namespace

        os.environ.update(call["env"])
        join_rank_group()  # first: the rank's work runs inside its device's budget
        enter_namespace(call["namespace"])
        os.chdir(call["cwd"])
        import runpy

        sys.argv = [call["module"], *call["argv"]]
        try:
            runpy.run_module(call["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported on the rank's stderr, as a crash would be
        import traceback

        traceback.print_exc()
    finally:
        # As the interpreter would at exit: the atexit handlers, among them Horovod's
        # shutdown, which lets the other ranks finish before this one's connections close
        # (without it a rank that leaves early resets its peers' Gloo pairs mid-collective).
        import atexit

        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # exiting anyway
                stream.flush()
        os._exit(code)


def _forward(fd: int, prefix: str) -> None:
    with os.fdopen(fd, errors="replace") as f:
        for line in f:
            print(prefix + line.rstrip("\n"), flush=True)


def _wait(pid: int, events: list[threading.Event]) -> int:
    """The child's exit code; it is stopped (SIGTERM, then SIGKILL) when an event is set."""
    stopping_since = None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if stopping_since is None and any(e.is_set() for e in events):
            stopping_since = time.monotonic()
            _kill(pid, signal.SIGTERM)
        elif stopping_since is not None and time.monotonic() - stopping_since > STOP_GRACE_S:
            _kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _kill(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
