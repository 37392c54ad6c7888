"""Run a function in a fresh Python process and bring its result (or its error) back.

ParameterServerStrategy connects the *process-global* eager context to the cluster, and
in-process servers cannot be shut down (TensorFlow's PSS docs). So every training job, audit and
test
scenario that coordinates a cluster runs its coordinator in a process of its own, forked from
the zygote (:mod:`ralp.cluster.zygote`: TensorFlow imported, nothing else started) and
stopped by its process id.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import time
import traceback
from collections.abc import Callable
from typing import Any

from ralp.cluster.zygote import context, exit_with, start_process
from ralp.errors import RalpError

_progress_conn = None  # in a child: the pipe to the parent, for report_progress
EXIT_GRACE_S = 2.0  # after its answer, a child gets this long to exit, then it is killed


def report_progress(message: Any) -> None:
    """From a function running under :func:`run_in_fresh_process`: pass ``message`` (picklable)
    to the parent's ``on_progress`` callback now. Does nothing outside such a child."""
    if _progress_conn is not None:
        _progress_conn.send(("progress", message))


class ChildError(RalpError, RuntimeError):
    """The function raised in the child process; ``child_traceback`` holds its traceback."""

    def __init__(self, message: str, child_traceback: str = "", child_type: str = ""):
        super().__init__(message)
        self.child_traceback = child_traceback
        self.child_type = child_type


def _child(conn, call: bytes, env: dict[str, str], netns: str | None, group,
           launcher_pid: int) -> None:
    global _progress_conn
    _progress_conn = conn
    # A launcher killed outright (SIGKILL) cannot stop this child: it stops itself then.
    exit_with(launcher_pid)
    faulthandler.enable()  # a crash in TensorFlow's C++ leaves the Python stack on stderr
    if group is not None:  # first: everything the child does is counted in its group
        group.join()
    os.environ.update(env)
    try:
        if netns is not None:  # before TensorFlow starts any thread or socket
            from ralp.emulation.iproute import enter_namespace

            enter_namespace(netns)
        from ralp._cli import quiet_tensorflow

        quiet_tensorflow()
        # Unpickled only now: the function's module may import TensorFlow, which must come
        # after entering the namespace and with its start-up banner filtered.
        fn, args, kwargs = pickle.loads(call)
        message = ("ok", fn(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
        message = ("error", type(e).__name__, str(e), traceback.format_exc())
    try:
        # A forked child leaves by os._exit, past AutoGraph's atexit clean-up; the traceback
        # above has read the sources already.
        from ralp._compat import remove_autograph_sources

        remove_autograph_sources()
        conn.send(message)
    finally:
        conn.close()


def run_in_fresh_process(
    fn: Callable[..., Any],
    *args: Any,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    netns: str | None = None,
    group=None,
    on_progress: Callable[[Any], None] | None = None,
    **kwargs: Any,
) -> Any:
    """``fn(*args, **kwargs)`` in a new process; its return value must be picklable.

    ``netns``: run the child inside that network namespace (a simulated cluster's chief).
    ``group``: a :class:`~ralp.emulation.devices.DeviceGroup` the child joins first (the
    simulated cluster counts its coordinator's CPU there).
    ``on_progress`` receives what the child passes to :func:`report_progress`.

    Raises :class:`ChildError` if ``fn`` raises (same message, the child's traceback
    attached), if the child dies without answering, or if it runs past ``timeout`` seconds
    (then it is killed).
    """
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    ctx = context(env)
    parent, child = ctx.Pipe(duplex=False)
    call = pickle.dumps((fn, args, kwargs))
    process = ctx.Process(target=_child, args=(child, call, env, netns, group, os.getpid()),
                          daemon=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        start_process(process)
        child.close()
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not parent.poll(left):
                raise ChildError(
                    f"{_name(fn)} did not finish within {timeout:.0f} s; it was stopped"
                )
            try:
                message = parent.recv()
            except EOFError:
                process.join(5)
                raise ChildError(
                    f"{_name(fn)} died without a result (exit code {process.exitcode})"
                ) from None
            if message[0] != "progress":
                break
            if on_progress is not None:
                on_progress(message[1])
    except BaseException:
        if process.pid is not None:  # interrupted or failed: the child's work is not wanted
            process.kill()
        raise
    finally:
        if process.pid is not None:
            process.join(EXIT_GRACE_S)  # let it exit by itself; a TF process tied to a cluster may hang
            if process.is_alive():
                process.kill()
                process.join()
        child.close()
        parent.close()
    if message[0] == "ok":
        return message[1]
    _, kind, text, tb = message
    raise ChildError(f"{kind}: {text}", child_traceback=tb, child_type=kind)


def _name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", repr(fn))
