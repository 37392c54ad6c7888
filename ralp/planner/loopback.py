"""A cluster whose tasks share this host: what its "links" and its CPUs cost, probed.

On a ``ralp.LocalCluster`` (or any cluster spec whose every address is this host) no wire
limits a step: the tasks reach each other over loopback, and every byte they move costs CPU
at both ends (gRPC's serialisation and copies), on the same cores that compute. Plain PS
pulls and pushes every kept variable each step, RALP only the boundary activations, so on
a shared host a large Dense kernel costs plain PS CPU time a real cluster would spend on its
NICs. :func:`probe_shared_host` measures, in a fresh process, what the planner's shared-CPU
term needs (:class:`ralp.planner.topology.SharedCPU`): gRPC's CPU per byte and per tensor
moved between two ``tf.distribute.Server`` tasks over loopback, one transfer's rate, and how
many cores one training step keeps busy. It takes a few seconds (most of them TensorFlow's start) and is kept per
device (:mod:`ralp.planner.rates_cache`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from ralp.planner.modes import PlannerError
from ralp.planner.topology import SharedCPU

PROBE_BYTES = 16 * 2**20  # one transfer's tensor: large enough that its per-byte cost rules
SMALL_TENSORS = 64  # tensors of one element moved in one step, for the cost per tensor
REPEATS = 5
PROBE_TIMEOUT_S = 120.0


def shares_this_host(cluster) -> bool:
    """Whether every task of ``cluster`` (a ``ClusterSpec``) listens on this host: a
    loopback address, or this host's own name or addresses."""
    own = _own_names()
    for _, _, address in cluster.tasks(include_chief=True):
        host = address.rsplit(":", 1)[0].strip("[]")
        if host.lower() in own:
            continue
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(host).is_loopback:
                continue
        return False
    return True


def _own_names() -> set[str]:
    names = {"localhost", socket.gethostname().lower()}
    with contextlib.suppress(OSError):
        names.add(socket.getfqdn().lower())
        for *_, sockaddr in socket.getaddrinfo(socket.gethostname(), None):
            names.add(str(sockaddr[0]).lower())
    return names


def usable_cores() -> float:
    """The CPUs this process may use: its affinity, less a control group's CPU quota."""
    cores = float(len(os.sched_getaffinity(0)))
    quota = _cpu_quota()
    return min(cores, quota) if quota else cores


def _cpu_quota() -> float | None:
    """Cores' worth of this process's control-group CPU quota (v1 ``cpu`` or v2), if set."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, group = line.split(":", 2)
            if controllers == "":
                quota, period = (Path("/sys/fs/cgroup") / group.lstrip("/") / "cpu.max"
                                 ).read_text().split()
                if quota != "max":
                    return int(quota) / int(period)
            elif "cpu" in controllers.split(","):
                base = Path("/sys/fs/cgroup/cpu") / group.lstrip("/")
                quota = int((base / "cpu.cfs_quota_us").read_text())
                if quota > 0:
                    return quota / int((base / "cpu.cfs_period_us").read_text())
    return None


def probe_shared_host(timeout: float = PROBE_TIMEOUT_S) -> SharedCPU:
    """Measure :class:`SharedCPU` for this host in a fresh Python process (it connects its
    eager context to two servers of its own, which cannot be undone in a process; a plain
    subprocess, as ``wrap`` may itself run in a daemonic process that cannot have children).
    Raises :class:`PlannerError` if the probe fails, saying how."""
    started = time.perf_counter()
    package_root = str(Path(__file__).resolve().parents[2])  # ralp importable as here
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "-1",
           "PYTHONPATH": path}
    try:
        done = subprocess.run([sys.executable, "-m", "ralp.planner.loopback"], env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise PlannerError(f"the loopback probe did not finish within {timeout:.0f} s; "
                           "pass calibration= to ralp.wrap, or a mode") from None
    if done.returncode != 0:
        raise PlannerError("the loopback probe failed: "
                           + (done.stderr.strip().splitlines() or ["no output"])[-1])
    fields = json.loads(done.stdout.strip().splitlines()[-1])
    return SharedCPU(cores=usable_cores(), **fields, probe_s=time.perf_counter() - started)


def _measure() -> dict[str, float]:
    """In the probe's process: two servers over loopback, both in this process, so its CPU
    time counts both ends of every transfer."""
    import tensorflow as tf

    from ralp.cluster.spec import free_ports

    ports = free_ports(2)
    spec = tf.train.ClusterSpec({"probe": [f"127.0.0.1:{p}" for p in ports]})
    tf.distribute.Server(spec, job_name="probe", task_index=1, start=True)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        spec, task_type="probe", task_id=0, rpc_layer="grpc")
    tf.config.experimental_connect_to_cluster(resolver, job_name="probe", task_index=0,
                                              make_master_device_default=False)
    here, there = "/job:probe/task:0", "/job:probe/task:1"
    with tf.device(there):
        big = tf.Variable(tf.zeros([PROBE_BYTES // 4]))
        small = [tf.Variable(tf.zeros([1])) for _ in range(SMALL_TENSORS)]
    with tf.device(here):
        gradient = tf.ones([PROBE_BYTES // 4])

    @tf.function(autograph=False)
    def pull():  # a worker reading a variable a PS task keeps
        with tf.device(here):
            return tf.reduce_sum(tf.identity(big.read_value()))

    @tf.function(autograph=False)
    def push():  # a worker's gradient applied on the PS task
        with tf.device(there):
            big.assign_add(gradient)
        return tf.constant(0.0)

    def pulls(count):
        @tf.function(autograph=False)
        def many():
            with tf.device(here):
                return tf.add_n([tf.identity(v.read_value()) for v in small[:count]])
        return many

    pull_cpu, pull_wall = _cpu_and_wall(pull)
    push_cpu, push_wall = _cpu_and_wall(push)
    one_cpu, _ = _cpu_and_wall(pulls(1))
    many_cpu, _ = _cpu_and_wall(pulls(SMALL_TENSORS))
    return {"cpu_s_per_byte": (pull_cpu + push_cpu) / 2 / PROBE_BYTES,
            "cpu_s_per_transfer": max(0.0, many_cpu - one_cpu) / (SMALL_TENSORS - 1),
            "bytes_per_s": 2 * PROBE_BYTES / (pull_wall + push_wall),
            "step_cores": _step_cores()}


def _cpu_and_wall(fn) -> tuple[float, float]:
    """The median call's CPU time (this process, all threads) and wall time."""
    import statistics

    fn().numpy()  # trace and first transfer
    cpu, wall = [], []
    for _ in range(REPEATS):
        c, w = time.process_time(), time.perf_counter()
        fn().numpy()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def _step_cores() -> float:
    """How many cores one training step of a convolution keeps busy: CPU time over wall."""
    import tensorflow as tf

    from ralp.planner.estimate import _conv_layer

    layer = _conv_layer(64, 64)
    x = tf.random.normal((32, 32, 32, 64))

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(layer.forward(x))
        return tape.gradient(y, layer.variables)

    step()
    return _ratio(lambda: [t.numpy() for t in step()])


def _ratio(step, budget_s: float = 0.3) -> float:
    c, w = time.process_time(), time.perf_counter()
    while time.perf_counter() - w < budget_s:
        step()
    return (time.process_time() - c) / (time.perf_counter() - w)


if __name__ == "__main__":  # the probe's own process: its figures as one JSON line
    print(json.dumps(_measure()), flush=True)
