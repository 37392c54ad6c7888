"""A PS cluster whose every task lives in its own network namespace on a shaped fabric."""

from __future__ import annotations

from ralp.cluster.local import LocalCluster
from ralp.cluster.spec import ClusterError, ClusterSpec
from ralp.defaults import DEFAULT_BANDWIDTH
from ralp.emulation.counters import TaskLinks
from ralp.emulation.fabric import PORT, Host, NetnsFabric
from ralp.profiler.links import LinkBytes


class NetnsCluster:
    """A PS cluster whose chief, workers and PS tasks each live in their own namespace on one
    NetnsFabric: real server processes (``LocalCluster`` tasks, each entering its host's
    namespace), all on port 2222.

    The chief gets a namespace and address but no process: run the training job (coordinator)
    in ``chief_namespace``. With a shared ``fabric`` (several jobs), give each job its own
    ``host_prefix`` (e.g. "j0-") so host names stay unique.
    """

    def __init__(
        self,
        workers: int,
        ps: int,
        *,
        fabric: NetnsFabric | None = None,
        bandwidth: str | None = DEFAULT_BANDWIDTH,
        latency: str | None = None,
        host_prefix: str = "",
        device_type: str = "cpu",
        task_env: dict[str, dict[str, str]] | None = None,
        task_groups: dict[str, object] | None = None,
        start_timeout: float = 120.0,
        restart_lost: bool = False,
        restart_delay: float = 0.0,
    ):
        if workers < 1 or ps < 1:
            raise ClusterError(f"need at least one worker and one PS task, got {workers} and {ps}")
        self.workers, self.ps = workers, ps
        self._owns_fabric = fabric is None
        self.fabric = fabric if fabric is not None else NetnsFabric(bandwidth, latency)
        self.host_prefix = host_prefix
        self.device_type = device_type
        self.task_env = task_env or {}  # "worker:0" -> extra environment (e.g. its GPU)
        self.task_groups = task_groups or {}  # "worker:0" -> its device's control group
        self.start_timeout = start_timeout
        self.restart_lost, self.restart_delay = restart_lost, restart_delay  # see LocalCluster
        self._hosts: dict[str, Host] = {}  # "worker:0" -> host
        self._cluster: LocalCluster | None = None
        self.spec: ClusterSpec | None = None

    def start(self) -> ClusterSpec:
        try:
            if self._owns_fabric:
                self.fabric.open()
            p = self.host_prefix
            self._hosts["chief:0"] = self.fabric.add_host(f"{p}chief")
            for i in range(self.workers):
                self._hosts[f"worker:{i}"] = self.fabric.add_host(f"{p}w{i}")
            for i in range(self.ps):
                self._hosts[f"ps:{i}"] = self.fabric.add_host(f"{p}ps{i}", side="back")
            addr = {task: f"{h.address}:{PORT}" for task, h in self._hosts.items()}
            self.spec = ClusterSpec(
                chief=addr["chief:0"],
                workers=tuple(addr[f"worker:{i}"] for i in range(self.workers)),
                ps=tuple(addr[f"ps:{i}"] for i in range(self.ps)),
            )
            # Each task enters its host's namespace itself, before its server opens a socket.
            namespaces = {t: h.namespace for t, h in self._hosts.items() if t != "chief:0"}
            self._cluster = LocalCluster(
                spec=self.spec,
                start_timeout=self.start_timeout,
                task_netns=namespaces,
                device_type=self.device_type,
                task_env=self.task_env,
                task_groups=self.task_groups,
                restart_lost=self.restart_lost,
                restart_delay=self.restart_delay,
            )
            self._cluster.start()
        except BaseException:
            self.stop()
            raise
        return self.spec

    def stop(self) -> None:
        try:
            if self._cluster is not None:
                self._cluster.stop()  # by PID: deleting a namespace kills nothing
        finally:
            if self._owns_fabric:
                self.fabric.close()
            else:
                for host in self._hosts.values():
                    self.fabric.remove_host(host.name)
            self._hosts.clear()

    def __enter__(self) -> NetnsCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ inspection

    @property
    def chief_namespace(self) -> str:
        return self._host("chief:0").namespace

    def task_hosts(self) -> dict[str, str]:
        return {task: host.name for task, host in self._hosts.items()}

    def link_bytes(self) -> dict[str, LinkBytes]:
        return self.link_reader()()

    def link_reader(self) -> TaskLinks:
        """A picklable reader of this cluster's link counters, keyed by task: a coordinator in
        another process reads them itself, right at the edges of its measured steps."""
        hosts = tuple((task, host.name) for task, host in self._hosts.items())
        return TaskLinks(self.fabric.switch_namespace, hosts)

    @property
    def pids(self) -> dict[str, int]:
        return self._local().pids

    def alive(self) -> dict[str, bool]:
        return self._local().alive()

    def kill_task(self, job: str, index: int) -> None:
        self._local().kill_task(job, index)

    def restart_task(self, job: str, index: int) -> None:
        """Start a lost task again, in its namespace at its address (see LocalCluster)."""
        self._local().restart_task(job, index)

    @property
    def started_pids(self) -> list[int]:
        return self._local().started_pids

    @property
    def namespaces(self) -> list[str]:
        """The network namespaces of this cluster's hosts."""
        return [host.namespace for host in self._hosts.values()]

    def log_text(self, job: str, index: int) -> str:
        return self._local().log_text(job, index)

    def _host(self, task: str) -> Host:
        if task not in self._hosts:
            raise ClusterError("the netns cluster is not running; call start() first")
        return self._hosts[task]

    def _local(self) -> LocalCluster:
        if self._cluster is None:
            raise ClusterError("the netns cluster was not started; call start() first")
        return self._cluster
