"""Fresh processes that start without importing TensorFlow again: a zygote.

Every cluster task and coordinator is a fresh process (ParameterServerStrategy binds a whole
process to one cluster, and servers cannot be shut down). Starting one with ``spawn`` costs a
TensorFlow import, about 5 CPU-seconds, and a simulated cluster starts five at once on a
2-core machine. So fresh processes are forked from a zygote instead: multiprocessing's
``forkserver``, which imports TensorFlow once (:mod:`ralp.cluster._preload`) and then forks a
child per request. A fork is fresh in what matters: TensorFlow has only been imported, no
context, device, server or graph exists yet, and the zygote runs a single thread (BLAS thread
pools are disabled in it), so forking it is safe.

A few settings are read by TensorFlow when it is imported (:data:`IMPORT_TIME_ENV`, e.g.
``TF_ENABLE_ONEDNN_OPTS``); a process that asks for other values of them than the zygote has
is spawned the old way. ``RALP_START_METHOD=spawn`` spawns everything.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Mapping

from ralp._process import process_gone

PRELOAD = "ralp.cluster._preload"
IMPORT_TIME_ENV = ("TF_ENABLE_ONEDNN_OPTS",)  # read by TensorFlow at import
_zygote_env: dict[str, str | None] | None = None  # the import-time settings the zygote has


def warm_up() -> None:
    """Start the zygote now, so that its TensorFlow import runs while this process does other
    work (the first cluster then starts without waiting for it)."""
    if context() is multiprocessing.get_context("forkserver"):
        from multiprocessing import forkserver

        forkserver.ensure_running()


def context(env: Mapping[str, str] | None = None):
    """The multiprocessing context to start a fresh process with ``env`` applied in it."""
    global _zygote_env
    if os.environ.get("RALP_START_METHOD", "forkserver") == "spawn":
        return multiprocessing.get_context("spawn")
    wanted = {k: (env or {}).get(k, os.environ.get(k)) for k in IMPORT_TIME_ENV}
    if _zygote_env is None:
        # The forkserver starts at its first use, with this process' environment now.
        _zygote_env = {k: os.environ.get(k) for k in IMPORT_TIME_ENV}
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([PRELOAD])
    if wanted != _zygote_env:
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context("forkserver")


def start_process(process) -> None:
    """``process.start()`` with Ctrl-C and SIGTERM held until it returns.

    An interrupt that lands inside ``start()`` after the fork, before the child's id is read
    back, leaves a child nobody knows to stop (a cluster task then outlives the run that
    started it). Held, the interrupt is raised once ``process.pid`` is known, so the caller's
    clean-up finds it. Outside the main thread (where no signal handler runs) it only starts.
    """
    held = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    # Handlers run in the main thread only; one set outside Python (None) cannot be restored.
    if threading.current_thread() is not threading.main_thread() or None in held.values():
        process.start()
        return
    caught: list[int] = []
    for signum in held:
        signal.signal(signum, lambda signum, _frame: caught.append(signum))
    try:
        process.start()
    finally:
        for signum, handler in held.items():
            signal.signal(signum, handler)
        for signum in caught[:1]:  # the first one, to the handler that was in place
            _deliver(signum, held[signum])


def _deliver(signum: int, handler) -> None:
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)


def exit_with(launcher_pid: int) -> None:
    """End this process (at once, ``os._exit``) when process ``launcher_pid`` has exited, as
    seen from a thread that looks twice a second: a child forked from the zygote is not the
    launcher's child, so the kernel's parent-death signal cannot do this."""
    import time

    def watch() -> None:
        while not process_gone(launcher_pid):
            time.sleep(0.5)
        os._exit(0)  # the run that started us is gone: do not linger

    threading.Thread(target=watch, daemon=True, name="ralp-launcher-watch").start()
