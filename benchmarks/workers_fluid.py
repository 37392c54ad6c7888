"""Several PS-mode workers' layer pipelines against shared PS links: in step or staggered?
(issue 26; an experiment, not the planner's model; it predates the finding that a worker's
forward waits for every read, and still starts each layer's forward when its own variables
are in, without the links' CPU cap: the planner's pipeline does both)

The planner's layer pipeline (:mod:`ralp.planner.pipeline`) simulates one worker, alone or with
the others in step. The step timelines show both states: RALP-H's two workers on resnet50 at
N = 4, 1 Gbit/s start an epoch in step (both pulling at half the PS link) and stagger after
four cycles (one pulling while the other pushes). This simulates every worker's pipeline at
once, as a fluid, event by event: each worker pulls its layers' variables, runs each layer's
forward when its variables are in, (RALP) sends the boundary activations, runs the tail on
the PS in a critical section and takes the boundary gradient back, runs the backward and
pushes each layer's gradients as the backward releases them, then starts its next step. The
links are shared in one of two ways:

- ``fair``: max-min fair over every transfer in flight (TCP's long-run share;
  :func:`ralp.planner.pipeline.max_min_rates`);
- ``first-come``: the worker whose step began first takes what it can use before the next
  one does (a PS serving requests in arrival order).

Each step's compute is scaled by a seeded uniform jitter (default +-5%), which is what breaks
a symmetric start in a deterministic model. Prints, per setting of a budgeted results file,
the measured median against both sharings' images/s at their steady cycle (the mean step
after the first five of 14, every worker starting at once unless ``--offset``), from the
calibration of the setting's first round. Runs nothing on the cluster.

    .venv/bin/python benchmarks/workers_fluid.py benchmarks/results/devices_n4_1gbit_steady.json
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ralp.planner.pipeline import BACKWARD_RATIO, Layer, max_min_rates  # noqa: E402

DONE = 1e-6  # bytes or seconds left below which a transfer or a computation is over


@dataclass
class Worker:
    index: int
    phase: str = "wait"  # fwd, xin, mutex, tail, xout, bwd, drain
    start_s: float = 0.0
    layer: int = 0
    compute_left: float | None = None
    pending: dict[int, set] = field(default_factory=dict)  # layer -> pulls not yet in
    factor: float = 1.0  # this step's compute jitter
    ends: list[float] = field(default_factory=list)


@dataclass
class Setting:
    layers: list[Layer]
    compute_s: float  # plain PS: the whole model's step; RALP: the head's
    workers: int
    bandwidth: float  # bytes/s, every link
    ralp: bool = False
    tail_s: float = 0.0
    exchange: tuple[float, float] = (0.0, 0.0)  # RALP: activations in, boundary gradient out


class FluidCluster:
    """The workers of ``setting`` from a common start (offsets in seconds per worker)."""

    def __init__(self, setting: Setting, first_come: bool = False, jitter: float = 0.05,
                 seed: int = 0):
        self.s, self.first_come, self.jitter = setting, first_come, jitter
        self.rng = random.Random(seed)
        self.capacity: dict = {}
        for w in range(setting.workers):
            self.capacity[("w", w, "in")] = self.capacity[("w", w, "out")] = setting.bandwidth
        tasks = {ps for layer in setting.layers for ps, _ in layer.variables} | {0}
        for ps in tasks:
            self.capacity[("ps", ps, "in")] = self.capacity[("ps", ps, "out")] = setting.bandwidth
        self.forward = [setting.compute_s * layer.flops_share / (1 + BACKWARD_RATIO)
                        for layer in setting.layers]
        self.workers = [Worker(w) for w in range(setting.workers)]
        self.transfers: dict = {}  # key (worker, kind, ...) -> [links, bytes left]
        self.queue: list[int] = []  # RALP's critical section: waiting workers
        self.holder: int | None = None
        self.now = 0.0

    def run(self, steps: int, offsets: list[float] | None = None) -> list[list[float]]:
        """Each worker's step end times, until every worker has ended ``steps`` steps."""
        waiting = {w.index: (offsets or [0.0] * len(self.workers))[w.index]
                   for w in self.workers}
        while min(len(w.ends) for w in self.workers) < steps:
            for index, at in list(waiting.items()):
                if at <= self.now + 1e-12:
                    self._start_step(self.workers[index])
                    del waiting[index]
            while any([self._advance(w) for w in self.workers]):
                pass
            self._to_next_event(min(waiting.values(), default=float("inf")))
        return [w.ends for w in self.workers]

    def _start_step(self, w: Worker) -> None:
        w.phase, w.layer, w.compute_left, w.start_s = "fwd", 0, None, self.now
        w.factor = 1 + self.jitter * (2 * self.rng.random() - 1)
        w.pending = {}
        for i, layer in enumerate(self.s.layers):
            for j, (ps, nbytes) in enumerate(layer.variables):
                self.transfers[(w.index, "pull", i, j)] = [
                    (("ps", ps, "out"), ("w", w.index, "in")), float(nbytes)]
                w.pending.setdefault(i, set()).add((w.index, "pull", i, j))

    def _advance(self, w: Worker) -> bool:
        """Move ``w`` to its next phase where nothing holds it; True if it moved."""
        if w.compute_left is not None:
            return False
        if w.phase == "fwd":
            if w.layer >= len(self.s.layers):
                return self._after_forward(w)
            if w.pending.get(w.layer):
                return False
            w.compute_left = self.forward[w.layer] * w.factor
        elif w.phase == "xin" and (w.index, "xin") not in self.transfers:
            w.phase = "mutex"
            self.queue.append(w.index)
        elif w.phase == "mutex" and self.holder is None and self.queue[0] == w.index:
            self.queue.pop(0)
            self.holder, w.phase, w.compute_left = w.index, "tail", self.s.tail_s
        elif w.phase == "xout" and (w.index, "xout") not in self.transfers:
            w.phase, w.layer = "bwd", len(self.s.layers) - 1
        elif w.phase == "bwd":
            if w.layer < 0:
                w.phase = "drain"
            else:
                w.compute_left = BACKWARD_RATIO * self.forward[w.layer] * w.factor
        elif w.phase == "drain" and not any(k[0] == w.index for k in self.transfers):
            w.ends.append(self.now)
            self._start_step(w)
        else:
            return False
        return True

    def _after_forward(self, w: Worker) -> bool:
        if self.s.ralp:
            w.phase = "xin"
            self.transfers[(w.index, "xin")] = [
                (("w", w.index, "out"), ("ps", 0, "in")), self.s.exchange[0]]
        else:
            w.phase, w.layer = "bwd", len(self.s.layers) - 1
        return True

    def _rates(self) -> dict:
        flows = {k: v[0] for k, v in self.transfers.items()}
        if not self.first_come:
            return max_min_rates(flows, self.capacity) if flows else {}
        rates, left = {}, dict(self.capacity)
        for w in sorted(self.workers, key=lambda w: w.start_s):
            mine = {k: links for k, links in flows.items() if k[0] == w.index}
            if mine:
                got = max_min_rates(mine, left)
                rates.update(got)
                for key, rate in got.items():
                    for link in mine[key]:
                        left[link] = max(0.0, left[link] - rate)
        return rates

    def _to_next_event(self, next_start: float) -> None:
        rates = self._rates()
        dt = next_start - self.now
        for key, (_, left) in self.transfers.items():
            if rates[key] > 0:
                dt = min(dt, left / rates[key])
        for w in self.workers:
            if w.compute_left is not None:
                dt = min(dt, w.compute_left)
        if dt == float("inf"):
            raise RuntimeError(f"no event after {self.now:.3f} s")
        self.now += dt
        for key in list(self.transfers):
            self.transfers[key][1] -= rates[key] * dt
            if self.transfers[key][1] <= DONE:
                del self.transfers[key]
                if key[1] == "pull":
                    self.workers[key[0]].pending[key[2]].discard(key)
        for w in self.workers:
            if w.compute_left is not None:
                w.compute_left -= dt
                if w.compute_left <= 1e-12:
                    w.compute_left = None
                    self._computed(w)

    def _computed(self, w: Worker) -> None:
        if w.phase == "fwd":
            w.layer += 1
        elif w.phase == "tail":
            self.holder, w.phase = None, "xout"
            self.transfers[(w.index, "xout")] = [
                (("ps", 0, "out"), ("w", w.index, "in")), self.s.exchange[1]]
        elif w.phase == "bwd":
            for j, (ps, nbytes) in enumerate(self.s.layers[w.layer].variables):
                self.transfers[(w.index, "push", w.layer, j)] = [
                    (("w", w.index, "out"), ("ps", ps, "in")), float(nbytes)]
            w.layer -= 1


def steady_cycle_s(setting: Setting, first_come: bool, steps: int = 14, skip: int = 5,
                   offset_s: float = 0.0) -> float:
    """The mean of every worker's step after its first ``skip``, worker k starting
    ``k * offset_s`` after the first."""
    ends = FluidCluster(setting, first_come).run(
        steps, [k * offset_s for k in range(setting.workers)])
    cycles = [b - a for e in ends for a, b in zip(e[skip - 1:-1], e[skip:], strict=True)]
    return statistics.mean(cycles)


def setting_of(record: dict) -> Setting:
    """A budgeted bench record's setting, from the calibration it carries."""
    from ralp.planner import validate
    from ralp.planner.cli import _zoo_workload
    from ralp.units import parse_bandwidth

    key = (record["model"], record["batch_size"], record["image_size"], record["num_classes"])
    compute = validate.own_calibration(record).find(*key).compute
    W = record["workers"]
    links = _zoo_workload(*key).links_on(record["mode"], W, record["ps"])
    bandwidth = parse_bandwidth(record["bandwidth"]) / 8
    if record["mode"] == "ps":
        return Setting(list(links.layers), compute.full_s, W, bandwidth)
    kept = sum(nbytes for layer in links.layers for _, nbytes in layer.variables)
    exchange = (max(0.0, max(links.ps_rx) / W - kept), max(0.0, max(links.ps_tx) / W - kept))
    return Setting(list(links.layers), compute.head_s, W, bandwidth, True, compute.tail_s,
                   exchange)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", help="a bench results JSON of budgeted PS-mode rounds")
    p.add_argument("--offset", type=float, default=0.0, metavar="S",
                   help="worker k starts k x S seconds after the first (default: all at once)")
    p.add_argument("--compute-scale", type=float, default=1.0, metavar="X",
                   help="every step's compute times X (what if a step alone took longer)")
    args = p.parse_args(argv)
    from ralp.planner import repeats, validate

    records = [r for _, r in validate.load_records([args.results])
               if repeats.budgeted(r) and r.get("calibration") and r["mode"] in
               ("ps", "ralp-h", "ralp-n")]
    print(f"{'model':<10} {'mode':<7} {'measured [band]':>18} {'fair':>13} {'first-come':>13}")
    for modes in repeats.settings_of(records).values():
        for mode, s in modes.items():
            one = next(r for r in s.records if r.get("calibration"))
            setting = setting_of(one)
            setting.compute_s *= args.compute_scale
            setting.tail_s *= args.compute_scale
            figures = []
            for first_come in (False, True):
                cycle = steady_cycle_s(setting, first_come, offset_s=args.offset)
                rate = setting.workers * one["batch_size"] / cycle
                figures.append(f"{rate:5.2f} ({rate / s.median - 1:+4.0%})")
            band = f"{s.median:.2f} [{s.band[0]:.1f}-{s.band[1]:.1f}]"
            print(f"{one['model']:<10} {mode:<7} {band:>18} {figures[0]:>13} {figures[1]:>13}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
