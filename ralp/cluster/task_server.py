"""``python -m ralp.server``: run one task (ps or worker) of a ParameterServerStrategy cluster.

Run it on every PS and worker host with the standard ``TF_CONFIG``, e.g.::

    TF_CONFIG='{"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"],
                            "ps": ["h3:2222"]},
                "task": {"type": "worker", "index": 0}}' python -m ralp.server

then run the training job (the coordinator) on the chief host with the same cluster. The
process serves until it is stopped (SIGTERM/SIGINT), or until ``--parent-pid`` exits, which
is how ralp's local launcher makes sure no task outlives the run that started it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time

from ralp._cli import fail, quiet_tensorflow
from ralp.cluster.zygote import exit_with
from ralp.defaults import GRPC_FAIL_FAST

PROG = "python -m ralp.server"
READY = "RALP_SERVER_READY"  # the launcher waits for this line on stdout
EXIT_PORT_BUSY = 2  # bad input, as every CLI: the port TF_CONFIG names is taken
PROFILER_PORT_ENV = "RALP_PROFILER_PORT"  # set: the task serves tf.profiler on this port


def main(argv: list[str] | None = None) -> int:
    """``python -m ralp.server``: the task named by ``TF_CONFIG``."""
    from ralp.cluster.spec import ClusterError, ClusterSpec

    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--parent-pid", type=int, help="exit when this process exits")
    parser.add_argument("--device-type", choices=("cpu", "gpu"), default="cpu",
                        help="gpu: let this task use its GPU (default cpu: hide GPUs)")
    args = parser.parse_args(argv)

    try:
        spec, task_type, task_index = ClusterSpec.from_tf_config(os.environ.get("TF_CONFIG"))
    except ClusterError as e:
        return fail(PROG, str(e))
    return serve(spec, task_type, task_index, args.device_type, args.parent_pid)


def serve_task(spec, job: str, index: int, device_type: str, parent_pid: int, log_path: str,
               env: dict[str, str], netns: str | None = None, group=None) -> None:
    """A task of :class:`~ralp.cluster.local.LocalCluster`, in a process fresh from the zygote:
    in its device's control group ``group`` (a :class:`~ralp.emulation.devices.DeviceGroup`)
    if given, output to ``log_path``, ``env`` applied, inside network namespace ``netns`` if
    given."""
    if group is not None:  # first: all the task's work runs inside its device's budget
        group.join()
    _name_process(f"ralp-{job}{index}")  # what ps and top show for it
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    os.environ.update(env)
    os.environ["TF_CONFIG"] = spec.tf_config(job, index)
    if netns is not None:  # before any socket: the server listens inside the namespace
        from ralp.emulation.iproute import enter_namespace

        enter_namespace(netns)
    sys.exit(serve(spec, job, index, device_type, parent_pid))


def _name_process(name: str) -> None:
    """Set this process' name (``/proc/self/comm``, at most 15 bytes)."""
    import ctypes

    pr_set_name = 15
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_name, name.encode()[:15], 0, 0, 0)


def serve(spec, task_type: str, task_index: int, device_type: str = "cpu",
          parent_pid: int | None = None) -> int:
    """Serve ``task_type:task_index`` of ``spec`` until SIGTERM (or ``parent_pid`` exits)."""
    if task_type not in ("ps", "worker"):
        return fail(PROG, f"task type {task_type!r}: ralp.server runs 'ps' and 'worker' tasks; "
                          "the chief runs the training job itself")
    if device_type == "cpu":
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
    # TensorFlow's failure handling needs it on every task: an RPC to a lost task fails at
    # once instead of waiting for it (so a lost worker's step is rerun elsewhere).
    os.environ["GRPC_FAIL_FAST"] = GRPC_FAIL_FAST
    if parent_pid:
        exit_with(parent_pid)

    quiet_tensorflow()
    import tensorflow as tf

    address = spec.address(task_type, task_index)
    try:
        server = tf.distribute.Server(
            tf.train.ClusterSpec(spec.as_dict()), job_name=task_type, task_index=task_index,
            protocol="grpc", start=True,
        )
    except tf.errors.UnknownError as e:
        print(f"{PROG}: error: could not start the gRPC server for {task_type}:{task_index} "
              f"on {address} ({e.message}). The port is probably in use: stop what holds it "
              "or choose another port in TF_CONFIG.", file=sys.stderr)
        return EXIT_PORT_BUSY
    profiler_port = os.environ.get(PROFILER_PORT_ENV)
    if profiler_port:  # the step timeline of this task, for tf.profiler's client (the trace)
        tf.profiler.experimental.server.start(int(profiler_port))
    print(f"{READY} {task_type} {task_index} {address} pid={os.getpid()}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    # The server runs on its own threads. The main thread sleeps in Python rather than in
    # server.join() (C++, never returns), so SIGTERM's handler runs at once.
    with contextlib.suppress(KeyboardInterrupt):
        while server is not None:
            time.sleep(3600)
    return 0
