"""Bytes moved per training step, per link and in total, for plain PS, Horovod, RALP and Stanza.

A *step* is one batch on every worker. Each figure counts a transfer once: ``total`` is the
sum of bytes sent between tasks, which equals the sum of bytes received. Per link, ``tx`` is
what that task sends and ``rx`` what it receives.

The PS and RALP figures come from one rule applied to a placement of the layer table:

- A variable whose layer runs somewhere other than its home PS task is read (pulled) once per
  execution and its gradient or update pushed once: 2 x its bytes per worker batch.
- A tensor whose producer and consumer run on different tasks crosses once forward; its
  gradient crosses back if anything upstream of it is trainable. A tensor goes to each
  receiving task once, however many layers there consume it (TF's Send/Recv pairs).
- Labels cross to the task that computes the loss, next to the model's output layer.

Plain PS puts every layer on the workers (2 x model bytes x W in total, as the RALP paper counts it). RALP moves
the offloaded layers onto their PS task, so only the kept layers' variables and the boundary
activations cross. Horovod ring-allreduce sends and receives 2 x S x (W-1)/W per worker, where
S counts the *trainable* variables only: Horovod averages gradients, and non-trainable state
(batch-norm moving statistics) stays on each replica. Under PS every variable crosses, the
non-trainable ones too: each worker reads them and writes their moving-average updates.

Stanza (layer separation; Wu et al. 2018) has n_c CONV ranks and n_f FC ranks; in its
:class:`StepTraffic` the CONV ranks are the ``workers`` and the FC ranks the ``ps`` links. A
CONV rank's link carries the ring allreduce of the kept (head) trainable variables among the
CONV ranks, its boundary activations and labels out and their gradients in; an FC rank's link
carries its group's activations and labels in and their gradients out, plus the ring
allreduce of the tail's trainable variables among the FC ranks when n_f > 1.

:func:`mode_traffic` is the one entry point: the profiler, the bench and the audit all get a
mode's predicted bytes from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from ralp.errors import InvalidArgumentError
from ralp.modes import BYTE_MODES as MODES
from ralp.modes import COLLECTIVE, HOROVOD, PS, RALP, STANZA
from ralp.profiler.layer_table import LayerTable
from ralp.profiler.links import LinkBytes
from ralp.profiler.ps_assignment import round_robin

WORKER = None  # the location of a layer that runs on the workers


@dataclass(frozen=True)
class StepTraffic:
    mode: str  # ps | horovod | ralp | stanza
    workers: int
    ps: int
    worker_link: LinkBytes  # each worker's link (all workers are alike)
    ps_links: tuple[LinkBytes, ...]  # one per PS task
    total: int
    breakdown: dict[str, int] = field(default_factory=dict)  # total by what crosses

    @property
    def busiest_link_bytes(self) -> int:
        """Bytes per step on the busiest link, in its busier direction (links are full
        duplex): on a bandwidth-bound network the step takes at least this over bandwidth."""
        return max(max(link.tx, link.rx) for link in (self.worker_link, *self.ps_links))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["busiest_link_bytes"] = self.busiest_link_bytes
        d["worker_link"]["total"] = self.worker_link.total
        for link, obj in zip(d["ps_links"], self.ps_links, strict=True):
            link["total"] = obj.total
        return d


def _check_cluster(workers: int, ps: int) -> None:
    if not isinstance(workers, int) or workers < 1:
        raise InvalidArgumentError(f"workers must be a positive integer, got {workers!r}")
    if not isinstance(ps, int) or ps < 0:
        raise InvalidArgumentError(f"ps must be a non-negative integer, got {ps!r}")


def placed_traffic(
    table: LayerTable,
    location: Mapping[str, int | None],
    variable_home: list[int],
    workers: int,
    ps: int,
    *,
    mode: str,
    label_bytes_per_sample: int = 4,
) -> StepTraffic:
    """Traffic of one step when row ``r`` runs at ``location[r]`` (None = on each worker)
    and variable ``k`` of ``table.variables`` lives on PS task ``variable_home[k]``."""
    _check_cluster(workers, ps)
    if ps < 1:
        raise InvalidArgumentError("a parameter-server placement needs at least one PS task")
    if len(variable_home) != len(table.variables):
        raise InvalidArgumentError("variable_home must give a PS task for every variable of the table")
    W = workers
    worker_tx = worker_rx = 0
    ps_tx, ps_rx = [0] * ps, [0] * ps
    breakdown = {"variables": 0, "activations": 0, "labels": 0}

    def send(src: int | None, dst: int | None, nbytes: int, what: str) -> None:
        # One transfer per worker batch, i.e. W per step; a worker's own link sees one.
        nonlocal worker_tx, worker_rx
        if src == dst or nbytes == 0:
            return
        if src is WORKER:
            worker_tx += nbytes
        else:
            ps_tx[src] += W * nbytes
        if dst is WORKER:
            worker_rx += nbytes
        else:
            ps_rx[dst] += W * nbytes
        breakdown[what] += W * nbytes

    for (row, _path, nbytes), home in zip(table.variables, variable_home, strict=True):
        where = location.get(row, WORKER)
        send(home, where, nbytes, "variables")  # pull
        send(where, home, nbytes, "variables")  # gradient / update push

    trainable_upstream: dict[str, bool] = {}
    for r in table.rows:
        trainable_upstream[r.name] = r.trainable_params > 0 or any(
            trainable_upstream.get(src, False) for src in r.inbound
        )
    rows = {r.name: r for r in table.rows}
    crossings: set[tuple[str, int | None]] = set()
    for r in table.rows:
        for src in r.inbound:
            if location.get(src, WORKER) != location.get(r.name, WORKER):
                crossings.add((src, location.get(r.name, WORKER)))
    for src, dst in sorted(crossings, key=lambda c: (c[0], -1 if c[1] is None else c[1])):
        here = location.get(src, WORKER)
        send(here, dst, rows[src].output_bytes, "activations")
        if trainable_upstream[src]:
            send(dst, here, rows[src].output_bytes, "activations")

    for out in table.output_names:
        send(WORKER, location.get(out, WORKER), table.batch_size * label_bytes_per_sample, "labels")

    return StepTraffic(
        mode=mode,
        workers=W,
        ps=ps,
        worker_link=LinkBytes(worker_tx, worker_rx),
        ps_links=tuple(LinkBytes(t, r) for t, r in zip(ps_tx, ps_rx, strict=True)),
        total=sum(breakdown.values()),
        breakdown=breakdown,
    )


def ps_traffic(table: LayerTable, workers: int, ps: int) -> StepTraffic:
    """Plain ParameterServerStrategy: everything runs on the workers, variables round-robin."""
    _check_cluster(workers, ps)
    homes = round_robin(len(table.variables), ps)
    return placed_traffic(table, {}, homes, workers, ps, mode=PS)


def ralp_traffic(
    table: LayerTable, offloaded: Mapping[str, int], workers: int, ps: int
) -> StepTraffic:
    """RALP: ``offloaded`` maps each offloaded row to its PS task; the variables of the other
    rows go round-robin over the PS tasks, those of an offloaded row live on its task."""
    _check_cluster(workers, ps)
    homes = variable_homes(table, offloaded, ps)
    return placed_traffic(table, offloaded, homes, workers, ps, mode=RALP)


def variable_homes(table: LayerTable, offloaded: Mapping[str, int], ps: int) -> list[int]:
    """The PS task of each variable of ``table.variables`` when ``offloaded`` maps rows to
    their PS tasks (none: plain PS): the other rows' variables round-robin over the ``ps``
    tasks in creation order, an offloaded row's on its task."""
    kept = [k for k, (row, _, _) in enumerate(table.variables) if row not in offloaded]
    kept_home = dict(zip(kept, round_robin(len(kept), ps), strict=True))
    return [kept_home[k] if k in kept_home else offloaded[row]
            for k, (row, _, _) in enumerate(table.variables)]


def horovod_traffic(gradient_bytes: int, workers: int) -> StepTraffic:
    """Ring allreduce of every gradient: each worker sends and receives 2 x S x (W-1)/W."""
    _check_cluster(workers, 0)
    per_worker = ring_allreduce_bytes(gradient_bytes, workers)
    return StepTraffic(
        mode=HOROVOD,
        workers=workers,
        ps=0,
        worker_link=LinkBytes(per_worker, per_worker),
        ps_links=(),
        total=per_worker * workers,
        breakdown={"gradients": per_worker * workers},
    )


def stanza_groups(conv_workers: int, fc_workers: int) -> tuple[range, ...]:
    """The CONV ranks each FC rank serves: consecutive, sizes differ by one at most."""
    n_c, n_f = conv_workers, fc_workers
    return tuple(range(g * n_c // n_f, (g + 1) * n_c // n_f) for g in range(n_f))


def ring_allreduce_bytes(nbytes: int, ranks: int) -> int:
    """What each of ``ranks`` ranks sends (and receives) in a ring allreduce of ``nbytes``."""
    return 2 * nbytes * (ranks - 1) // ranks


def stanza_traffic(
    table: LayerTable,
    offloaded: Mapping[str, int],
    conv_workers: int,
    fc_workers: int,
    label_bytes_per_sample: int = 4,
) -> StepTraffic:
    """Stanza: the rows in ``offloaded`` (the tail) run on each of ``fc_workers`` FC ranks,
    the others (the head) on each of ``conv_workers`` CONV ranks."""
    _check_cluster(conv_workers, fc_workers)
    if not offloaded or fc_workers < 1:
        raise InvalidArgumentError("Stanza needs layers on the FC ranks and at least one FC rank")
    rows = {r.name: r for r in table.rows}
    tail_bytes = sum(rows[name].trainable_param_bytes for name in offloaded)
    head_bytes = table.trainable_param_bytes_total - tail_bytes
    # The head's outputs that the tail consumes: one flat block per sample crosses.
    boundary = {src for r in table.rows if r.name in offloaded for src in r.inbound
                if src not in offloaded}
    activations = sum(rows[src].output_bytes for src in boundary)  # one CONV rank's batch
    labels = table.batch_size * label_bytes_per_sample
    head_ring = ring_allreduce_bytes(head_bytes, conv_workers)
    conv_link = LinkBytes(head_ring + activations + labels, head_ring + activations)
    tail_ring = ring_allreduce_bytes(tail_bytes, fc_workers)
    fc_links = tuple(
        LinkBytes(len(group) * activations + tail_ring,
                  len(group) * (activations + labels) + tail_ring)
        for group in stanza_groups(conv_workers, fc_workers)
    )
    breakdown = {
        "gradients": head_ring * conv_workers + tail_ring * fc_workers,
        "activations": 2 * activations * conv_workers,
        "labels": labels * conv_workers,
    }
    return StepTraffic(
        mode=STANZA,
        workers=conv_workers,
        ps=fc_workers,
        worker_link=conv_link,
        ps_links=fc_links,
        total=sum(breakdown.values()),
        breakdown=breakdown,
    )


def mode_traffic(
    table: LayerTable,
    mode: str,
    workers: int,
    ps: int = 1,
    offloaded: Mapping[str, int] | None = None,
) -> StepTraffic:
    """The byte model of one training mode, per step (one batch on every worker).

    ``mode``: "ps" (plain PS, ``ps`` tasks), "horovod" or "collective" (a ring allreduce of the
    trainable variables' gradients, no PS: Gloo's, or TensorFlow's own over gRPC), "ralp" (``offloaded`` maps each offloaded row to its PS
    task; an empty mapping is plain PS) or "stanza" (``workers`` CONV ranks, ``ps`` FC ranks
    holding the ``offloaded`` rows).
    """
    if mode == PS or (mode == RALP and not offloaded):
        return ps_traffic(table, workers, ps)
    if mode in (HOROVOD, COLLECTIVE):
        return horovod_traffic(table.trainable_param_bytes_total, workers)
    if mode == RALP:
        return ralp_traffic(table, offloaded, workers, ps)
    if mode == STANZA:
        return stanza_traffic(table, offloaded or {}, workers, ps)
    raise InvalidArgumentError(f"unknown mode {mode!r}; the byte model knows {', '.join(MODES)}")
