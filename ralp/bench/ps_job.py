"""One benchmark run of a PS mode, in the coordinator (chief) process: place, warm up, measure.

:func:`bench_job` runs in a fresh process (``run_in_fresh_process``; on the netns backend
inside the chief's namespace). It builds the zoo model, wraps it for the run's mode and runs
one epoch: warm-up steps (every worker traces and runs its first step in them), the measured
steps, and one more step per worker, so that the measured window starts and ends with the
workers busy as in a long epoch (:func:`_window_after_warmup`). Throughput, step time and the
devices' CPU come from the measured window only; bytes are the link counters' deltas over
the whole epoch, whose edges no step straddles, divided by its steps. The predicted bytes
and the profiler's verdict come from the profile ``wrap`` computed for the placement.

It returns the run's figures; :func:`ralp.bench.records.make_record` makes the record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ralp import modes as registry
from ralp.bench.measure import cpu_window, link_figures, sync_figures, timing, wire_figures
from ralp.bench.runspec import RunSpec
from ralp.errors import InvalidArgumentError
from ralp.profiler.links import LinkBytes

LinkReader = Callable[[], Mapping[str, LinkBytes]]  # "worker:0" / "ps:0" / "chief:0" -> counters


class SetupClock:
    """Seconds spent in each start-up phase of a run, in order (``setup`` in the record)."""

    def __init__(self, started: float | None = None):
        self.phases: dict[str, float] = {}
        self._last = time.time() if started is None else started

    def lap(self, phase: str) -> None:
        now = time.time()
        self.phases[phase] = round(now - self._last, 3)
        self._last = now


def bench_job(cluster_spec, run: RunSpec, read_links: LinkReader | None = None,
              barrier: Barrier | None = None, started: float | None = None,
              profiler_address: str | None = None, read_cpu=None) -> dict:
    """Measure ``run`` on the cluster at ``cluster_spec``; returns the run's figures.

    ``started`` (``time.time()``) is when the coordinator process was asked for: the time
    until this function runs is its start-up (process, TensorFlow import).

    With a ``barrier`` (several jobs sharing a network), the measured steps start when every
    job has warmed up, and this job keeps training after them until every job has measured,
    so each job's figures are taken under the others' load. ``read_cpu`` (a
    :class:`~ralp.emulation.cpu_meter.DeviceMeter`) reads the device groups' CPU counters at the
    measured window's edges, as ``read_links`` reads the links'.
    """
    clock = SetupClock(started)
    clock.lap("coordinator_start")
    from ralp.cluster.fresh_process import report_progress

    W, B = run.workers, run.batch_size
    trainer = placed_trainer(cluster_spec, run, clock)
    plan, prof = trainer.plan, trainer.profile
    predicted = prof.traffic(plan.offloaded)

    dataset_fn = dataset_fn_for(run)
    # Every worker traces nothing (the coordinator does) but builds and runs its graph on its
    # first step: warm up with at least one step per worker so none of that is measured.
    report_progress(("phase", "warm-up"))
    steps = run.measured_steps
    if barrier is None:
        window = _window_after_warmup(trainer, dataset_fn, run, read_links, read_cpu, clock)
    else:
        window = _window_at_barrier(trainer, dataset_fn, run, barrier, read_links, read_cpu,
                                    clock)
    traced = {}
    if run.trace_pulls:
        report_progress(("phase", "tracing worker 0"))
        traced = trace_pulls(trainer, dataset_fn, profiler_address, W * window.wall / steps, B)

    history = window.history
    return {
        **run.to_dict(),
        "offloaded_layers": list(plan.offloaded),
        "split_after": plan.split_after,
        "profiler_verdict": prof.verdict,
        "skewness": prof.skewness,
        "setup": clock.phases,
        "wall_s": window.wall,
        "measured_steps": steps,
        # "in_epoch": between the warm-up and one more step per worker, in one epoch;
        # "own_epoch": an epoch of its own, all workers starting at once (jobs at a barrier)
        "window": "in_epoch" if barrier is None else "own_epoch",
        **timing(history.step_end_times, window.start, steps, W, B),
        "bytes_per_step_predicted": float(predicted.worker_link.total),
        "ps_bytes_per_step_predicted": float(sum(link.total for link in predicted.ps_links) / W),
        "final_loss": float(history.step_losses[-1]) if history.step_losses else None,
        "pull_batches": len(plan.pull_batches) or None,
        "pull_predicted_s": (trainer.runtime.pull_choice.predicted_s
                             if trainer.runtime.pull_choice else None),
        **traced,
        **sync_figures(history),
        **link_figures(window.links_before, window.links_after, window.link_steps or steps),
        **wire_figures(*(window.wire or (window.links_before, window.links_after))),
        **cpu_window(window.cpu_before, window.cpu_after),
    }


def placed_trainer(cluster_spec, run: RunSpec, clock: SetupClock):
    """The run's model, built and placed on the cluster (plain PS or RALP)."""
    import keras

    from ralp.cluster.fresh_process import report_progress
    from ralp.models import build_model
    from ralp.wrapping import Failures, wrap

    keras.utils.set_random_seed(run.seed)
    model = build_model(run.model, num_classes=run.num_classes, image_size=run.image_size)
    clock.lap("build_model")
    report_progress(("phase", "placing"))
    # run.batch_size is one worker's batch (the papers' per-GPU batch); a BSP round's update
    # is every worker's batch together
    synced = run.sync is not None and str(run.sync).startswith("bsp")
    trainer = wrap(
        model,
        cluster_spec,
        mode=registry.MODES[run.mode].wrap_as,
        optimizer=keras.optimizers.SGD(learning_rate=1e-3),
        batch_size=run.batch_size * (run.workers if synced else 1),
        device_type=run.device_type,
        failures=Failures(step_timeout=600.0),
        sync=run.sync,
        pulls=run.pull_schedule,
    )
    if run.slow_worker:
        from ralp.ps_strategy.sync import SlowWorker, check_slow_worker

        trainer.runtime.slow_worker = SlowWorker.parse(run.slow_worker)
        check_slow_worker(trainer.runtime.slow_worker, run.workers)
    clock.lap("place")
    return trainer


@dataclass
class _Window:
    """The measured steps: their history, wall time, and the counters at their edges."""

    history: object
    start: float
    wall: float
    links_before: dict | None
    links_after: dict | None
    cpu_before: object
    cpu_after: object
    link_steps: int | None = None  # steps the link counters' edges span (None: the window's)
    # the link counters at the measured steps' own edges (None: links_before/after are)
    wire: tuple | None = None


def _window_after_warmup(trainer, dataset_fn, run: RunSpec, read_links: LinkReader | None,
                         read_cpu, clock: SetupClock) -> _Window:
    """The warm-up, the measured steps and one more step per worker in one epoch; the window
    runs from the last warm-up step seen finished to the last measured one.

    An epoch starts every worker at once, and with fair shares of the PS's link they keep
    in step for the first cycles (all pull, then all compute, then all push, so those
    steps run longer than later ones), and it ends with the workers running out of steps
    one by one. A user's epoch of hundreds of steps sees neither, so the window leaves both
    out. The link counters are read at the epoch's edges, where no step is in flight:
    bytes per step are exact over all of its steps (every step moves the same). They are
    read at the window's edges too: the busiest direction's load in the time the measured
    steps took, which the wire time must not outrun (the epoch's edges span more steps,
    and the warm-up's)."""
    from ralp.cluster.fresh_process import report_progress

    W, warm, steps = run.workers, run.warmup_steps, run.measured_steps
    edges = _callbacks().WindowEdges(warm, warm + steps, read_cpu, clock, report_progress,
                                     read_links)
    before = dict(read_links()) if read_links else None
    history = trainer.fit(dataset_fn, steps_per_epoch=warm + steps + W, verbose=0,
                          callbacks=[edges])
    after = dict(read_links()) if read_links else None
    ends = history.step_end_times
    start = ends[warm - 1]
    history.step_end_times = ends[warm:warm + steps]
    return _Window(history, start, ends[warm + steps - 1] - start, before, after,
                   edges.cpu[0], edges.cpu[1], link_steps=warm + steps + W,
                   wire=tuple(edges.links) if read_links else None)


def _window_at_barrier(trainer, dataset_fn, run: RunSpec, barrier: Barrier,
                       read_links: LinkReader | None, read_cpu, clock: SetupClock) -> _Window:
    """Jobs sharing a network: a warm-up epoch, then the measured steps as an epoch of their
    own, started when every job is ready, the link and CPU counters read at their edges;
    the load stays on until every job is done."""
    from ralp.cluster.fresh_process import report_progress

    trainer.fit(dataset_fn, steps_per_epoch=run.warmup_steps, verbose=0)
    clock.lap("warmup")
    report_progress(("phase", "waiting for the other jobs"))
    barrier.arrive("ready")
    barrier.wait("go")
    report_progress(("phase", "measuring"))
    before = dict(read_links()) if read_links else None
    cpu_before = read_cpu() if read_cpu else None
    start = time.perf_counter()
    history = trainer.fit(dataset_fn, steps_per_epoch=run.measured_steps, verbose=0,
                          callbacks=[_callbacks().ProgressCallback(report_progress)])
    wall = time.perf_counter() - start
    cpu_after = read_cpu() if read_cpu else None
    after = dict(read_links()) if read_links else None
    barrier.arrive("done")
    report_progress(("phase", "keeping the load on"))
    while not barrier.passed("stop"):
        trainer.fit(dataset_fn, steps_per_epoch=run.workers, verbose=0)
    return _Window(history, start, wall, before, after, cpu_before, cpu_after)


TRACED_STEPS = 4  # about this many of worker 0's steps are traced


def trace_pulls(trainer, dataset_fn, profiler_address: str, step_s: float, batch: int) -> dict:
    """Trace worker 0 while the cluster trains on: the median over its complete traced steps
    of the share of pull time hidden behind compute, the pull-active time and the step time."""
    import statistics

    from ralp.audit.timeline import length, trace_while_training

    if profiler_address is None:
        raise InvalidArgumentError("tracing pulls needs worker 0's profiler (Launcher.cluster(trace=True))")
    steps = trace_while_training(trainer, dataset_fn, batch, profiler_address,
                                 max(2.0, (TRACED_STEPS + 1) * step_s))
    shares = [s.hidden_share() for s in steps if s.hidden_share() is not None]
    if not shares:
        return {"pull_hidden_share": None, "pull_active_s": None, "traced_step_s": None}
    return {
        "pull_hidden_share": statistics.median(shares),
        "pull_active_s": statistics.median(length(s.pull_active()) for s in steps if s.pulls),
        "traced_step_s": statistics.median(s.seconds for s in steps),
    }


def dataset_fn_for(run: RunSpec):
    """The per-worker dataset function of a run's ``data``."""
    if run.data == "digits":
        from ralp.models.digits import digits_dataset_fn

        return digits_dataset_fn(run.image_size, run.batch_size, run.seed)
    from ralp.models.model_file import file_facts, is_model_file
    from ralp.models.synthetic import synthetic_dataset_fn

    if not is_model_file(run.model):
        return synthetic_dataset_fn(run.image_size, run.batch_size, run.num_classes, run.seed)
    facts = file_facts(run.model)  # a saved model: its channels, and every input it takes
    several = len(facts.inputs) > 1
    return synthetic_dataset_fn(run.image_size, run.batch_size, run.num_classes, run.seed,
                                facts.channels, facts.inputs if several else None,
                                facts.image_key)


def _callbacks():
    from ralp.bench import window_callbacks

    return window_callbacks


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
