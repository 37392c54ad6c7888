"""Where a benchmark's cluster comes from: the three backends.

- ``local``: every task a ``python -m ralp.server`` process on loopback; no privileges.
  Links are not separate here, so bytes are not measured (only predicted).
- ``netns``: every task (and the coordinator) in its own network namespace, joined by a
  bridge; each link shaped with ``tc`` to the bandwidth; bytes read from each task's link
  counters. Needs root.
- ``tf-config``: a real cluster that is already running ``python -m ralp.server`` on each
  host; the bench is the chief. A run uses the first workers and PS tasks it needs.

Mode ``horovod`` starts no PS cluster: :mod:`ralp.horovod.launch` starts its ranks with
horovodrun (local; on a real cluster from ``hostfile``) or in namespaces (netns).

Each backend gives a :class:`ClusterHandle` in a ``with`` block and stops what it started when
the block ends, also on errors and Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ralp.bench.runspec import AUTO_CPUS, BACKENDS, BenchError
from ralp.cluster.local import LocalCluster
from ralp.cluster.spec import ClusterError, ClusterSpec
from ralp.emulation.budget import Budget, budget_for
from ralp.emulation.cpu_meter import DeviceMeter
from ralp.emulation.devices import DeviceGroup
from ralp.horovod.launch import horovod_unavailable_reason
from ralp.modes import COLLECTIVE_MODES, HOROVOD_MODES
from ralp.profiler.links import LinkBytes

LinkReader = Callable[[], Mapping[str, LinkBytes]]  # "worker:0" / "ps:0" / "chief:0" -> counters


@dataclass
class ClusterHandle:
    """A running cluster as a benchmark run sees it."""

    spec: ClusterSpec
    netns: str | None = None  # the coordinator's network namespace (netns backend)
    read_links: LinkReader | None = None  # picklable; None where links are not measured
    cluster: object | None = None  # the LocalCluster / NetnsCluster, when we started one
    start_s: float = 0.0  # seconds it took to start (namespaces, servers ready)
    profiler_address: str | None = None  # worker 0's tf.profiler service, when asked for
    chief_group: DeviceGroup | None = None  # where the coordinator's CPU is counted
    read_cpu: DeviceMeter | None = None  # the tasks' and the coordinator's CPU counters


CHIEF = "chief"  # the coordinator's control group (it only counts: no limit)


@dataclass(frozen=True)
class Launcher:
    """Starts clusters for runs on one backend."""

    backend: str = "local"
    bandwidth: str | None = None  # netns only: each task's link, e.g. "1gbit"
    latency: str | None = None  # netns only (needs the kernel's netem)
    device_type: str = "cpu"
    cluster_spec: ClusterSpec | None = None  # tf-config: the running cluster
    hostfile: str | None = None  # tf-config, mode horovod: horovodrun's host file
    restart_lost: bool = False  # restart a task that exits, as Kubernetes would (chaos runs)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise BenchError(f"unknown backend {self.backend!r}; choose from {', '.join(BACKENDS)}")
        if self.backend != "netns" and (self.bandwidth or self.latency):
            raise BenchError(f"--bandwidth and --latency shape simulated links: they need the "
                             f"netns backend, not {self.backend!r}")
        if self.backend == "tf-config" and self.cluster_spec is None and self.hostfile is None:
            raise BenchError("the tf-config backend needs the cluster: set TF_CONFIG (with "
                             "task type 'chief') or pass --cluster FILE (PS modes), or "
                             "--hostfile FILE (mode horovod)")
        if self.hostfile and self.backend != "tf-config":
            raise BenchError("--hostfile names a real cluster's hosts for mode horovod: use it "
                             "with --backend tf-config")

    def check(self, modes=()) -> None:
        """Fail now, before any run, if the backend (or Horovod, for mode horovod) cannot work
        on this machine."""
        for mode in (m for m in HOROVOD_MODES if m in modes):
            reason = horovod_unavailable_reason()
            if reason:
                raise BenchError(f"mode {mode} is unavailable: {reason}")
            if self.backend == "tf-config" and not self.hostfile:
                raise BenchError(f"mode {mode} on a real cluster needs its hosts: pass "
                                 "--hostfile FILE (horovodrun's format: 'host slots=N' lines)")
        if self.backend == "tf-config" and set(modes) & set(COLLECTIVE_MODES):
            raise BenchError("mode collective runs on the local and netns backends; on a real "
                             "cluster start ralp.wrap(model, mode='collective') on every host with its "
                             "TF_CONFIG (docs/how-to/real-cluster.md)")
        if (self.backend == "tf-config" and self.cluster_spec is None
                and set(modes) - set(HOROVOD_MODES)):
            raise BenchError("the PS modes on the tf-config backend need the cluster: set "
                             "TF_CONFIG (task type 'chief') or pass --cluster FILE")
        if self.backend == "netns":
            from ralp.emulation.iproute import netns_unavailable_reason
            from ralp.units import parse_bandwidth

            reason = netns_unavailable_reason()
            if reason:
                raise BenchError(f"the netns backend is unavailable: {reason}")
            if self.bandwidth:
                parse_bandwidth(self.bandwidth)
            if self.latency:  # a throwaway host: does this kernel emulate delay (netem)?
                from ralp.emulation.fabric import NetnsFabric

                with NetnsFabric(None, self.latency, prefix=f"rlp{os.getpid()}-probe") as fabric:
                    fabric.add_host("probe")

    def budget(self, device_cpus: str = AUTO_CPUS, devices: int = 1) -> Budget | None:
        """The CPU budget of a run's devices (:mod:`ralp.emulation.budget`); None on a real
        cluster, whose devices are real."""
        if self.backend == "tf-config":
            return None
        try:
            return budget_for(device_cpus, devices)
        except ClusterError as e:
            raise BenchError(str(e)) from None

    @contextlib.contextmanager
    def cluster(self, workers: int, ps: int, trace: bool = False,
                budget: Budget | None = None) -> Iterator[ClusterHandle]:
        """A fresh cluster; with ``trace``, worker 0 serves tf.profiler (``profiler_address``);
        with a ``budget``, every task in a control group of its own (its device) and the
        coordinator in one that only counts (``chief_group``; ``read_cpu`` reads them all)."""
        if self.backend == "tf-config":
            if trace:
                raise BenchError("--trace-pulls starts the profiler in the cluster's tasks: "
                                 "use the local or netns backend")
            yield ClusterHandle(self._subset(workers, ps))
            return
        task_env = _gpu_env(workers, ps) if self.device_type == "gpu" else {}
        port = None
        if trace:
            from ralp.cluster.spec import free_ports
            from ralp.cluster.task_server import PROFILER_PORT_ENV

            port = free_ports(1)[0] if self.backend == "local" else PROFILER_PORT
            task_env.setdefault("worker:0", {})[PROFILER_PORT_ENV] = str(port)
        hosts = task_hosts(workers, ps)
        groups_of = budget.groups(list(hosts.values()), [CHIEF]) if budget else None
        with groups_of or contextlib.nullcontext() as groups:
            task_groups, counted = {}, {}
            if groups is not None:
                task_groups = {task: groups.group(host) for task, host in hosts.items()}
                for task in hosts:
                    task_env[task] = {**budget.task_env(), **task_env.get(task, {})}
                counted = {"chief_group": groups.group(CHIEF),
                           "read_cpu": groups.meter({**hosts, "chief:0": CHIEF})}
            start = time.time()
            if self.backend == "local":
                cluster = LocalCluster(workers, ps, task_env=task_env, task_groups=task_groups,
                                       device_type=self.device_type,
                                       restart_lost=self.restart_lost)
            else:
                from ralp.cluster.netns_cluster import NetnsCluster

                cluster = NetnsCluster(workers, ps, bandwidth=self.bandwidth, latency=self.latency,
                                       device_type=self.device_type, task_env=task_env,
                                       task_groups=task_groups,
                                       restart_lost=self.restart_lost)
            with cluster:
                netns = {}
                if self.backend == "netns":
                    netns = {"netns": cluster.chief_namespace, "read_links": cluster.link_reader()}
                yield ClusterHandle(cluster.spec, cluster=cluster,
                                    start_s=round(time.time() - start, 3),
                                    profiler_address=_profiler(cluster.spec, port),
                                    **netns, **counted)

    def _subset(self, workers: int, ps: int) -> ClusterSpec:
        spec = self.cluster_spec
        assert spec is not None
        if len(spec.workers) < workers or len(spec.ps) < ps:
            raise ClusterError(
                f"this run needs {workers} workers and {ps} PS tasks, but the cluster has "
                f"{len(spec.workers)} and {len(spec.ps)}: start more tasks or ask for fewer "
                "devices (--devices / --workers / --ps)"
            )
        # The coordinator may use any subset of the running servers (verified with TF 2.21).
        return ClusterSpec(spec.chief, spec.workers[:workers], spec.ps[:ps])


def task_hosts(workers: int, ps: int) -> dict[str, str]:
    """Task -> its host's (and device group's) name on a simulated cluster."""
    return {**{f"worker:{i}": f"w{i}" for i in range(workers)},
            **{f"ps:{i}": f"ps{i}" for i in range(ps)}}


PROFILER_PORT = 6009  # worker 0's tf.profiler service in its own namespace (netns)


def _profiler(spec: ClusterSpec, port: int | None) -> str | None:
    return None if port is None else f"{spec.workers[0].rsplit(':', 1)[0]}:{port}"


def _gpu_env(workers: int, ps: int) -> dict[str, dict[str, str]]:
    """On a multi-GPU host, give each task one GPU (round robin), the RALP PS included."""
    count = _gpu_count()
    if count == 0:
        raise BenchError("--device-type gpu, but no GPU is visible here (nvidia-smi -L lists "
                         "none); use --device-type cpu")
    tasks = [f"worker:{i}" for i in range(workers)] + [f"ps:{i}" for i in range(ps)]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",") if visible else [str(i) for i in range(count)]
    return {task: {"CUDA_VISIBLE_DEVICES": ids[k % len(ids)]} for k, task in enumerate(tasks)}


def _gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
