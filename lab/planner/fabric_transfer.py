"""gRPC's CPU per byte on the simulated fabric, at a link rate, on budgeted devices.

The loopback probe (:mod:`lab.planner.transfer`) moves bytes between two servers of one
process, unshaped. On the budgeted simulated cluster a PS mode's bytes cross a veth pair and a
shaped link instead, and arrive at the link's pace, which costs more CPU per byte than
loopback: slower links cost more (more, smaller socket reads and writes; more wake-ups).

This probe measures it where a PS step pays it: a worker and a PS task, real
``tf.distribute.Server`` processes each in its own namespace and control group of the bench's
budget, joined by links shaped at ``rate``. A coordinator (the probe's chief, outside the
budgets) runs steps that pull a step's worth of variables from the PS to the worker and push
an update of each back (an ``assign_sub`` on the PS), as a PS step reads and writes its
variables. Each end's CPU comes from its group's counters and its bytes from its link's
counters, over the timed steps: the figure is CPU seconds per byte that crossed, summed over
both ends (as :attr:`lab.planner.host.Host.cpu_s_per_byte` counts them).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from ralp.errors import RalpError

PROBE_STEP_S = 1.0  # the wire time of one probe step (a pull and a push) at the probe's rate
MIN_STEP_BYTES, MAX_STEP_BYTES = 4 * 1024**2, 128 * 1024**2  # pulled in a probe step
VARIABLES = 4  # a step's bytes split over this many variables, transferred at once
PROBE_STEPS = 5  # timed steps, after one to warm up
PROBE_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class FabricTransfer:
    rate_bits: int  # the links' rate, bits/s
    step_bytes: int  # pulled (and pushed back) per probe step
    cpu_s_per_byte: float  # both ends' CPU seconds per byte that crossed the PS's link
    ps_cpu_s_per_byte: float  # the PS end's share, per byte through its link (both ways)
    worker_cpu_s_per_byte: float  # the worker end's
    step_s: float  # median wall time of one probe step
    throttled: tuple[float, float]  # share of the (PS, worker) groups' periods throttled


def step_bytes_at(rate_bits: int) -> int:
    """The bytes a probe step pulls at ``rate_bits``: about :data:`PROBE_STEP_S` on the wire
    for the pull and the push together, within the bounds, a multiple of 4 x the variables."""
    wanted = rate_bits / 8 * PROBE_STEP_S / 2
    size = int(min(MAX_STEP_BYTES, max(MIN_STEP_BYTES, wanted)))
    return size - size % (4 * VARIABLES)


def measure_fabric_transfer(budget, rate_bits: int, steps: int = PROBE_STEPS) -> FabricTransfer:
    """gRPC's CPU per byte between a worker and a PS task on two devices of ``budget`` (a
    :class:`ralp.emulation.budget.Budget` with control groups) over links of ``rate_bits``.
    Needs root (namespaces, control groups).

    Raises:
        RalpError: the probe could not run (the message says why).
    """
    size = step_bytes_at(rate_bits)
    record = run_on_budgeted_fabric(budget, 1, f"{rate_bits}bit", _probe, size, steps)
    return _figures(record, rate_bits, size)


def run_on_budgeted_fabric(budget, workers: int, bandwidth: str, probe, *args,
                           timeout: float = PROBE_TIMEOUT_S):
    """``probe(cluster, *args, meter, read_links)`` in a fresh process in the chief's namespace
    of a simulated cluster of ``workers`` workers and one PS task, each task in a control
    group of ``budget``, the links at ``bandwidth``; ``cluster`` is its spec as a dict,
    ``meter`` reads the tasks' CPU counters ("ps:0", "worker:0", ...), ``read_links`` their
    link counters. The chief is in a group of its own, outside the budgets. Returns what the
    probe returns. Needs root (namespaces, control groups).

    Raises:
        RalpError: ``budget`` gives no control groups (the message says why).
    """
    from ralp.cluster.fresh_process import run_in_fresh_process
    from ralp.cluster.netns_cluster import NetnsCluster

    if budget.hierarchy is None or budget.cpus is None:
        raise RalpError("gRPC's CPU on the fabric is measured on budgeted devices: this host "
                        f"gives none ({budget.describe()})")
    hosts = {"ps:0": "ps0", **{f"worker:{i}": f"w{i}" for i in range(workers)}}
    with budget.groups(list(hosts.values()), ["chief"]) as groups:
        task_groups = {task: groups.group(host) for task, host in hosts.items()}
        task_env = {task: budget.task_env() for task in hosts}
        with NetnsCluster(workers, 1, bandwidth=bandwidth, task_env=task_env,
                          task_groups=task_groups) as cluster:
            return run_in_fresh_process(
                probe, cluster.spec.as_dict(), *args, groups.meter(hosts),
                cluster.link_reader(), netns=cluster.chief_namespace,
                group=groups.group("chief"), timeout=timeout)


def _figures(record: dict, rate_bits: int, size: int) -> FabricTransfer:
    per_end = {}
    for task in ("ps:0", "worker:0"):
        moved = record["bytes"][task]
        if moved <= 0:
            raise RalpError(f"the probe's {task} link counted no bytes")
        per_end[task] = record["cpu_s"][task] / moved
    return FabricTransfer(rate_bits, size, per_end["ps:0"] + per_end["worker:0"],
                          per_end["ps:0"], per_end["worker:0"], record["step_s"],
                          (record["throttled"]["ps:0"], record["throttled"]["worker:0"]))


def _probe(cluster: dict, size: int, steps: int, meter, read_links) -> dict:
    """In the chief's namespace: connect, run the steps, read both ends' counters around the
    timed ones."""
    import tensorflow as tf

    from lab.planner.transfer import pull_and_push_step

    tf.config.experimental_connect_to_cluster(tf.train.ClusterSpec(cluster), job_name="chief")
    pull_and_push = pull_and_push_step(size, VARIABLES)
    pull_and_push().numpy()  # trace and warm up (TCP's window too)
    cpu_before, links_before = meter(), read_links()
    walls = []
    for _ in range(steps):
        start = time.perf_counter()
        pull_and_push().numpy()
        walls.append(time.perf_counter() - start)
    cpu_after, links_after = meter(), read_links()
    out = {"step_s": statistics.median(walls), "cpu_s": {}, "bytes": {}, "throttled": {}}
    for task in ("ps:0", "worker:0"):
        a, b = cpu_before.tasks[task], cpu_after.tasks[task]
        out["cpu_s"][task] = b.used_s - a.used_s
        periods = b.periods - a.periods
        out["throttled"][task] = (b.throttled - a.throttled) / periods if periods else 0.0
        out["bytes"][task] = links_after[task].total - links_before[task].total
    return out
