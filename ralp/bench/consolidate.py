"""Workload consolidation (as in the RALP paper, Park et al. 2019): several jobs at once over
one shared bottleneck link.

Topology (netns backend): every job's chief and workers sit on a "front" bridge, every PS
task on a "back" bridge, and the two bridges are joined by one trunk shaped to
``--bandwidth``. Each job is a full cluster of its own (its own PS, workers and coordinator);
all worker <-> PS traffic of all jobs crosses the one trunk, as jobs in a shared cluster
compete for the network. Host links are not shaped: the trunk is the bottleneck.

Jobs start measuring together (after every job has warmed up) and keep training after their
measured steps until the last job is done, so each job's throughput is taken under the load
of all the others.

Scenarios with J jobs (models cycle through ``--models``, default the default comparison's; each
job gets ``--devices`` devices, default 4):

- ``all-ps``: every job plain PS (N/2 + N/2);
- ``all-ralp``: every job RALP-N (N-1 + 1);
- ``mixed``: the first half of the jobs RALP-N, the rest plain PS.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ralp import modes as registry
from ralp.bench.config import DEFAULT_COMPARISON, SCENARIOS, BenchRequest
from ralp.bench.launcher import Launcher, task_hosts
from ralp.bench.ps_job import Barrier, bench_job
from ralp.bench.records import derived_figures, error_text, make_record
from ralp.bench.runner import RUN_TIMEOUT_S
from ralp.bench.runspec import BenchError, RunSpec
from ralp.cluster.fresh_process import run_in_fresh_process
from ralp.emulation.budget import fidelity


def scenario_runs(scenario: str, jobs: int, models: list[str], devices: int,
                  workload_for: Callable[[str], dict]) -> list[RunSpec]:
    """The J runs of one scenario, in job order."""
    if scenario not in SCENARIOS:
        raise BenchError(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}")
    runs = []
    for k in range(jobs):
        if scenario == "all-ps":
            mode = registry.PS
        elif scenario == "all-ralp":
            mode = registry.RALP_N
        else:
            mode = registry.RALP_N if k < (jobs + 1) // 2 else registry.PS
        model = models[k % len(models)]
        runs.append(RunSpec.for_devices(model, mode, devices, **workload_for(model)))
    return runs


def run_scenario(scenario: str, runs: list[RunSpec], launcher: Launcher,
                 progress: bool = True) -> list[dict]:
    """Run the scenario's jobs at once on one fabric with a shared trunk; one record each."""
    from tqdm import tqdm

    from ralp.emulation.fabric import NetnsFabric

    fabric = NetnsFabric(bandwidth=None, latency=launcher.latency,
                         trunk_bandwidth=launcher.bandwidth)
    # Every device of every job gets its budget: the host's CPUs shared by all of them.
    budget = launcher.budget(runs[0].device_cpus, sum(run.devices for run in runs))
    hosts = {(k, task): f"j{k}-{host}" for k, run in enumerate(runs)
             for task, host in task_hosts(run.workers, run.ps).items()}
    chiefs = [f"j{k}-chief" for k in range(len(runs))]
    groups_of = budget.groups(list(hosts.values()), chiefs) if budget else None
    bar = tqdm(total=sum(r.measured_steps for r in runs), unit="step", desc=f"{scenario} x{len(runs)}",
               disable=not progress, dynamic_ncols=True)
    with (groups_of or contextlib.nullcontext() as groups, fabric,
          tempfile.TemporaryDirectory(prefix="ralp-consolidate-") as gates):
        clusters = [_cluster(run, k, fabric, launcher, budget, groups, hosts)
                    for k, run in enumerate(runs)]
        jobs = _Jobs(runs, clusters, gates, bar, groups, chiefs)
        meter = None
        if groups is not None:  # every job's tasks and coordinators, read at the gates
            meter = groups.meter({**{f"j{k}-{task}": h for (k, task), h in hosts.items()},
                                  **{name: name for name in chiefs}})
        try:
            for cluster in jobs.clusters:
                cluster.start()
            threads = [threading.Thread(target=jobs.run, args=(k,), daemon=True)
                       for k in range(len(runs))]
            for t in threads:
                t.start()
            trunk, cpu_start = _gate(gates, "ready", "go", len(runs), fabric, meter)
            trunk_end, cpu_end = _gate(gates, "done", "stop", len(runs), fabric, meter)
            for t in threads:
                t.join()
        finally:
            for cluster in jobs.clusters:
                cluster.stop()
            bar.close()
    cpu = fidelity(budget, cpu_start, cpu_end, unbudgeted=tuple(chiefs)) if budget else None
    trunk_bytes = None
    if trunk is not None and trunk_end is not None:
        trunk_bytes = (trunk_end.tx - trunk.tx) + (trunk_end.rx - trunk.rx)
    where = {"backend": "netns", "bandwidth": launcher.bandwidth, "scenario": scenario,
             "trunk_bytes_measured": trunk_bytes}
    return [_record(run, result, dict(where, job=k), cpu)
            for k, (run, result) in enumerate(zip(runs, jobs.results, strict=True))]


def _cluster(run: RunSpec, k: int, fabric, launcher: Launcher, budget, groups, hosts: dict):
    """Job ``k``'s cluster on the shared fabric, its tasks in their devices' groups with
    thread pools sized to them (when budgeted)."""
    from ralp.cluster.netns_cluster import NetnsCluster

    placed = {}
    if groups is not None:
        mine = {task: groups.group(h) for (j, task), h in hosts.items() if j == k}
        placed = {"task_groups": mine, "task_env": {task: budget.task_env() for task in mine}}
    return NetnsCluster(run.workers, run.ps, fabric=fabric, host_prefix=f"j{k}-",
                        device_type=launcher.device_type, **placed)


class _Jobs:
    """The scenario's jobs, each run by a thread of its own (:meth:`run`) in a fresh process
    on its cluster; their results (a record's figures or the exception) and one progress bar
    for all."""

    def __init__(self, runs: list[RunSpec], clusters: list, gates: str, bar, groups,
                 chiefs: list[str]) -> None:
        self.runs, self.clusters, self.gates, self.bar = runs, clusters, gates, bar
        self.groups, self.chiefs = groups, chiefs
        self.results: list[dict | Exception | None] = [None] * len(runs)
        self.done = [0] * len(runs)
        self.lock = threading.Lock()

    def _advance(self, k: int, steps: int) -> None:
        with self.lock:
            self.bar.update(steps - self.done[k])
            self.done[k] = steps

    def run(self, k: int) -> None:
        def on_progress(message):
            kind, value = message
            if kind == "step":
                self._advance(k, value)

        cluster = self.clusters[k]
        try:
            self.results[k] = run_in_fresh_process(
                bench_job, cluster.spec, self.runs[k], cluster.link_reader(),
                Barrier(self.gates, k), started=time.time(), netns=cluster.chief_namespace,
                group=self.groups.group(self.chiefs[k]) if self.groups else None,
                on_progress=on_progress, timeout=RUN_TIMEOUT_S,
                env={"CUDA_VISIBLE_DEVICES": "-1"},
            )
        except Exception as e:  # noqa: BLE001 - any failure becomes the job's record
            self.results[k] = e
            Path(self.gates, f"ready-{k}").touch()  # a failed job must not hold the others
            Path(self.gates, f"done-{k}").touch()
        self._advance(k, self.runs[k].measured_steps)


def _record(run: RunSpec, result, where: dict, cpu: dict | None) -> dict:
    """One job's record: its figures, or its error."""
    if not isinstance(result, dict):
        return make_record(run.to_dict(), where, error=error_text(result))
    result["setup_s"] = round(sum(result["setup"].values()), 3)
    if cpu is not None:  # one window for all jobs: from the first go to the last stop
        result.update(cpu=cpu, host_kept_up=cpu["kept_up"])
    record = make_record(run.to_dict(), where, result)
    # The bottleneck is the shared trunk, not one job's link: no per-job network time.
    record.update(derived_figures({**record, "busiest_link_bytes": None}, None))
    return record


def _gate(gates: str, phase: str, gate: str, jobs: int, fabric, meter=None):
    """Wait until every job reached ``phase``, read the trunk and CPU counters, open ``gate``."""
    while not all(Path(gates, f"{phase}-{k}").exists() for k in range(jobs)):
        time.sleep(0.05)
    counters, cpu = fabric.trunk_bytes(), meter() if meter else None
    Path(gates, gate).touch()
    return counters, cpu


def run_consolidation(request: BenchRequest, launcher: Launcher, progress: bool = True,
                      on_record=None) -> list[dict]:
    """``--jobs J``: every scenario asked for, in order; one record per job."""
    if launcher.backend != "netns":
        raise BenchError("--jobs needs the netns backend: the jobs must share one shaped link "
                         "(run as root with --backend netns)")
    if not launcher.bandwidth:
        raise BenchError("--jobs needs --bandwidth: the rate of the shared link")
    devices = (request.devices or DEFAULT_COMPARISON.devices)[0]
    models = request.model_names()
    cpus = request.cpu_budgets(devices * request.jobs)  # every job's devices share the host
    if len(cpus) > 1:
        raise BenchError("--jobs runs every job on one budget: give one --device-cpus value")

    def workload(model: str) -> dict:
        return {**request.workload(model), "device_cpus": cpus[0]}

    records: list[dict] = []
    for scenario in request.scenarios or SCENARIOS:
        runs = scenario_runs(scenario, request.jobs, models, devices, workload)
        for record in run_scenario(scenario, runs, launcher, progress=progress):
            records.append(record)
            if on_record:
                on_record(record)
    return records
