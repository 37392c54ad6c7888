"""One benchmark run, in the coordinator (chief) process: place, warm up, measure.

:func:`bench_job` runs in a fresh process (``run_in_fresh_process``; on the netns backend
inside the chief's namespace). It builds the zoo model, wraps it for the run's mode, runs
warm-up steps until every worker has traced and run its step, then reads the link counters,
runs the measured steps and reads them again. Throughput and step time come from the
measured steps only; bytes are the counter deltas over exactly those steps.

The returned record is a plain dict (see :mod:`ralp.bench.report` for the schema).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ralp.bench.config import RunSpec
from ralp.profiler.links import LinkBytes

LinkReader = Callable[[], Mapping[str, LinkBytes]]  # "worker:0" / "ps:0" / "chief:0" -> counters
PROGRESS_EVERY = 5  # measured steps between progress messages to the parent


def bench_job(
    cluster_spec, run: RunSpec, read_links: LinkReader | None = None, barrier: Barrier | None = None
) -> dict:
    """Measure ``run`` on the cluster at ``cluster_spec``; returns the run's record fields.

    With a ``barrier`` (several jobs sharing a network), the measured steps start when every
    job has warmed up, and this job keeps training after them until every job has measured,
    so each job's figures are taken under the others' load.
    """
    import keras

    from ralp.models import build_model
    from ralp.profiler.api import profile
    from ralp.profiler.bytes_model import ps_traffic, ralp_traffic
    from ralp.ps_strategy.fresh_process import report_progress
    from ralp.ps_strategy.trainer import wrap

    run = run.resolved()
    W, B = run.workers, run.batch_size
    keras.utils.set_random_seed(run.seed)
    model = build_model(run.model, num_classes=run.num_classes, image_size=run.image_size)
    prof = profile(model, B, workers=W, ps=run.ps)
    report_progress(("phase", "placing"))
    trainer = wrap(
        model,
        cluster_spec,
        mode="ps" if run.mode == "ps" else "ralp",
        optimizer=keras.optimizers.SGD(learning_rate=1e-3),
        batch_size=B,
        device_type=run.device_type,
        step_timeout=600.0,
        sync=run.sync,
        slow_worker=run.slow_worker,
    )
    plan = trainer.plan
    if plan.is_empty:
        predicted = ps_traffic(prof.table, W, run.ps)
    else:
        predicted = ralp_traffic(prof.table, plan.offloaded, W, run.ps)

    dataset_fn = dataset_fn_for(run)
    # Every worker traces nothing (the coordinator does) but builds and runs its graph on its
    # first step: warm up with at least one step per worker so none of that is measured.
    report_progress(("phase", "warm-up"))
    trainer.fit(dataset_fn=dataset_fn, steps_per_epoch=run.warmup_steps, batch_size=B,
                verbose=0)  # fmt: skip
    steps = run.measured_steps

    if barrier is not None:
        report_progress(("phase", "waiting for the other jobs"))
        barrier.arrive("ready")
        barrier.wait("go")
    report_progress(("phase", "measuring"))
    before = dict(read_links()) if read_links else None
    start = time.perf_counter()
    history = trainer.fit(
        dataset_fn=dataset_fn,
        steps_per_epoch=steps,
        batch_size=B,
        verbose=0,
        callbacks=[_ProgressCallback(report_progress)],
    )
    wall = time.perf_counter() - start
    after = dict(read_links()) if read_links else None
    if barrier is not None:
        barrier.arrive("done")
        report_progress(("phase", "keeping the load on"))
        while not barrier.passed("stop"):
            trainer.fit(dataset_fn=dataset_fn, steps_per_epoch=W, batch_size=B, verbose=0)

    record = {
        **run.to_dict(),
        "offloaded_layers": list(plan.offloaded),
        "split_after": plan.split_after,
        "profiler_verdict": prof.verdict,
        "skewness": prof.skewness,
        "wall_s": wall,
        "measured_steps": steps,
        **timing(history.step_end_times, start, steps, W, B),
        "bytes_per_step_predicted": float(predicted.worker_link.total),
        "ps_bytes_per_step_predicted": float(sum(link.total for link in predicted.ps_links) / W),
        "final_loss": float(history.step_losses[-1]) if history.step_losses else None,
        **sync_figures(history),
    }
    record.update(link_figures(before, after, steps))
    return record


def sync_figures(history) -> dict:
    """Under a sync paradigm: the largest clock gap any step started at, and the time workers
    spent held (all workers, seconds)."""
    if not history.sync:
        return {"sync_max_gap": None, "sync_waiting_s": None}
    return {"sync_max_gap": max(r.max_gap for r in history.sync),
            "sync_waiting_s": sum(sum(r.waiting_s) for r in history.sync)}  # fmt: skip


def dataset_fn_for(run: RunSpec):
    """The per-worker dataset function of a resolved run's ``data``."""
    if run.data == "digits":
        from ralp.models.digits import digits_dataset_fn

        return digits_dataset_fn(run.image_size, run.batch_size, run.seed)
    from ralp.models.synthetic import synthetic_dataset_fn

    return synthetic_dataset_fn(run.image_size, run.batch_size, run.num_classes, run.seed)


@dataclass(frozen=True)
class Barrier:
    """A file-system barrier between concurrent jobs and their launcher: a job marks a phase
    by creating ``<phase>-<index>``; the launcher opens a gate by creating ``<gate>``."""

    directory: str
    index: int

    def arrive(self, phase: str) -> None:
        Path(self.directory, f"{phase}-{self.index}").touch()

    def passed(self, gate: str) -> bool:
        return Path(self.directory, gate).exists()

    def wait(self, gate: str, timeout: float = 3600.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.passed(gate):
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {self.index}: gate {gate!r} not opened in {timeout:.0f} s")
            time.sleep(0.05)


def timing(end_times: list[float], start: float, steps: int, workers: int, batch: int) -> dict:
    """Throughput and step time over the measured steps, with their spread over windows.

    A window is one round: as many steps as workers, so each window is about one step time
    of a worker. Throughput is images of all workers per second; step time is the time a
    worker takes for one batch (``workers`` x wall time / steps).
    """
    wall = end_times[-1] - start
    rates, step_times = [], []
    previous = start
    for k in range(workers - 1, len(end_times), workers):
        span = max(end_times[k] - previous, 1e-9)
        rates.append(workers * batch / span)
        step_times.append(span)
        previous = end_times[k]
    return {
        "images_per_sec": steps * batch / wall,
        "images_per_sec_std": _std(rates),
        "step_time_s": workers * wall / steps,
        "step_time_std_s": _std(step_times),
    }


def link_figures(
    before: Mapping[str, LinkBytes] | None, after: Mapping[str, LinkBytes] | None, steps: int
) -> dict:
    """Measured bytes per worker batch on the worker links and on the PS links, and the
    busiest link's bytes (for the network-bound step time).

    The busiest link's bytes count both directions: a PS step pulls the variables, computes,
    then pushes the gradients, so on the bottleneck link the two directions take turns rather
    than overlap. ``busiest_link_one_way_bytes`` is its busier direction alone (the bound if
    they overlapped fully)."""
    if before is None or after is None:
        return {"bytes_per_step_measured": None, "ps_bytes_per_step_measured": None,
                "busiest_link": None, "busiest_link_bytes": None,
                "busiest_link_one_way_bytes": None, "links": None}  # fmt: skip
    delta = {
        task: LinkBytes(after[task].tx - before[task].tx, after[task].rx - before[task].rx)
        for task in after
    }
    workers = sum(d.total for t, d in delta.items() if t.startswith("worker:"))
    ps = sum(d.total for t, d in delta.items() if t.startswith("ps:"))
    busiest = max(delta, key=lambda t: delta[t].total)
    return {
        "bytes_per_step_measured": workers / steps,
        "ps_bytes_per_step_measured": ps / steps,
        "busiest_link": busiest,
        "busiest_link_bytes": delta[busiest].total,
        "busiest_link_one_way_bytes": max(delta[busiest].tx, delta[busiest].rx),
        "links": {t: {"tx": d.tx, "rx": d.rx} for t, d in sorted(delta.items())},
    }


def _std(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


class _ProgressCallback:
    """Sends the number of measured steps done to the parent every few steps."""

    def __init__(self, send: Callable[[object], None]):
        self.send = send

    def set_model(self, model) -> None:
        pass

    def on_train_batch_end(self, batch: int, logs=None) -> None:
        if (batch + 1) % PROGRESS_EVERY == 0:
            self.send(("step", batch + 1))

    def __getattr__(self, name: str):
        if name.startswith("on_"):  # every other Keras hook: nothing to do
            return lambda *args, **kwargs: None
        raise AttributeError(name)
