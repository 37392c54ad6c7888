"""Run a function in a fresh Python process and bring its result (or its error) back.

ParameterServerStrategy connects the *process-global* eager context to the cluster, and
in-process servers cannot be shut down (BRIEF §8). So every training job, audit and test
scenario that coordinates a cluster runs its coordinator in a process of its own, started
with ``spawn`` (no inherited TensorFlow state) and stopped by its process id.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from collections.abc import Callable
from typing import Any


class ChildError(RuntimeError):
    """The function raised in the child process; ``child_traceback`` holds its traceback."""

    def __init__(self, message: str, child_traceback: str = "", child_type: str = ""):
        super().__init__(message)
        self.child_traceback = child_traceback
        self.child_type = child_type


def _child(conn, fn: Callable, args: tuple, kwargs: dict, env: dict[str, str]) -> None:
    os.environ.update(env)
    try:
        from ralp._cli import quiet_tensorflow

        quiet_tensorflow()
        result = fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
        conn.send(("error", type(e).__name__, str(e), traceback.format_exc()))
    else:
        conn.send(("ok", result))
    finally:
        conn.close()


def run_in_fresh_process(
    fn: Callable[..., Any],
    *args: Any,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    **kwargs: Any,
) -> Any:
    """``fn(*args, **kwargs)`` in a new process; its return value must be picklable.

    Raises :class:`ChildError` if ``fn`` raises (same message, the child's traceback
    attached), if the child dies without answering, or if it runs past ``timeout`` seconds
    (then it is killed).
    """
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    process = ctx.Process(target=_child, args=(child, fn, args, kwargs, env), daemon=True)
    process.start()
    child.close()
    try:
        if not parent.poll(timeout):
            raise ChildError(f"{_name(fn)} did not finish within {timeout:.0f} s; it was stopped")
        try:
            message = parent.recv()
        except EOFError:
            process.join(5)
            raise ChildError(
                f"{_name(fn)} died without a result (exit code {process.exitcode})"
            ) from None
    finally:
        process.join(10)  # let it exit by itself; a TF process tied to a cluster may hang
        if process.is_alive():
            process.kill()
            process.join()
        parent.close()
    if message[0] == "ok":
        return message[1]
    _, kind, text, tb = message
    raise ChildError(f"{kind}: {text}", child_traceback=tb, child_type=kind)


def _name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", repr(fn))
