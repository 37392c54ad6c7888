"""What one benchmark run is: the model, the mode and its resources, the workload.

Modes and their resources (RALP's configurations, Park et al. 2019): :mod:`ralp.planner.modes`
(ps, ralp-h, ralp-n, horovod,
stanza, collective).

In a ``stanza`` run, ``workers`` counts the CONV ranks and ``ps`` the FC ranks.

Data: ``synthetic`` (one random batch per worker, as tf_cnn_benchmarks) or ``digits``
(scikit-learn's handwritten digits, real images with 10 classes, sharded over the workers).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ralp import modes as registry
from ralp.emulation.budget import AUTO, SHARED, choices, default_share
from ralp.errors import RalpError
from ralp.planner.modes import MODES, PlannerError
from ralp.planner.modes import resources as mode_resources

DATA = ("synthetic", "digits")
BACKENDS = ("local", "netns", "tf-config")
DEFAULT_STEPS = 100  # measured steps per worker, as in the paper (tf_cnn_benchmarks)
DEFAULT_WARMUP = 2  # warm-up steps per worker (at least 1: a worker's first step sets up)
# --device-cpus: the default budget; no budget (a device watcher may add words of its own)
AUTO_CPUS, SHARED_CPUS = AUTO, SHARED


class BenchError(RalpError, ValueError):
    """A benchmark request that cannot be run as asked; the message says what to change."""


def resources(mode: str, devices: int, fc_workers: int = 1) -> tuple[int, int]:
    """(workers, ps) for ``mode`` on ``devices`` devices (the planner's rule, one copy;
    ``fc_workers``: stanza's FC ranks)."""
    try:
        return mode_resources(mode, devices, fc_workers)
    except PlannerError as e:
        raise BenchError(str(e)) from None


@dataclass(frozen=True)
class RunSpec:
    """One measured run: a model trained in one mode on one cluster shape.

    ``image_size``/``batch_size`` None mean the model's benchmark defaults: they are filled in
    when the spec is made, so every RunSpec is resolved, once. ``devices`` is what the mode was
    given (N); ``workers`` + ``ps`` may be fewer (ralp-h leaves devices idle).
    ``steps`` and ``warmup`` count per worker, as tf_cnn_benchmarks' ``num_batches`` does: a
    run measures ``steps x workers`` batches in all.
    """

    model: str
    mode: str
    devices: int
    workers: int
    ps: int
    batch_size: int | None = None
    image_size: int | None = None  # None: the model's benchmark default (filled in at once)
    num_classes: int = 1000
    steps: int = DEFAULT_STEPS
    warmup: int = DEFAULT_WARMUP
    device_type: str = "cpu"
    seed: int = 0
    data: str = "synthetic"
    sync: str | None = None  # ps/ralp modes: "bsp", "asp", "ssp:S", "dssp:L:U" (None: PSS's own)
    slow_worker: str | None = None  # "INDEX:FACTOR" or "INDEX:+SECONDS": one worker slowed
    pull_schedule: str = "default"  # ps/ralp modes: how workers pull (default, layer, ibatch)
    trace_pulls: bool = False  # trace worker 0 after measuring: pull time hidden by compute
    # CPUs per simulated device, as asked: "auto" (the host's CPUs less a reserve, over N),
    # "shared" (no budget) or a number (ralp.emulation.budget)
    device_cpus: str = AUTO_CPUS
    # --modes auto: the planner's choice that made this run's mode, and why (AutoChoice's
    # to_dict: chosen, every candidate's predicted images/s, the calibration); None otherwise
    auto: dict | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise BenchError(f"unknown mode {self.mode!r}; choose from {', '.join(MODES)}")
        entry = registry.MODES[self.mode]
        if entry.family == registry.ALLREDUCE and entry.on_horovod:
            if self.workers < 1 or self.ps != 0:
                raise BenchError(f"mode {self.mode!r} runs workers only (no PS task), got "
                                 f"{self.workers} workers and {self.ps} PS")
            if self.device_type != "cpu":
                raise BenchError(f"mode {self.mode!r} runs on the CPU: ralp's Horovod build has "
                                 "Gloo only (no NCCL); use --device-type cpu")
        elif entry.family == registry.LAYER_SPLIT:
            self._check_stanza()
        elif entry.family == registry.ALLREDUCE:
            if self.workers < 2 or self.ps != 0:
                raise BenchError(f"mode {self.mode!r} allreduces over at least 2 workers and no "
                                 f"PS task, got {self.workers} workers and {self.ps} PS")
        elif self.workers < 1 or self.ps < 1:
            raise BenchError(f"a run needs at least one worker and one PS task, got "
                             f"{self.workers} workers and {self.ps} PS")
        if entry.family == registry.PS_FAMILY and entry.offloads and self.ps != 1:
            # The RALP paper leaves several PS tasks (activations of many workers) to future work.
            raise BenchError(f"mode {self.mode!r} runs with one PS task, got {self.ps}")
        if self.steps < 1 or self.warmup < 0:
            raise BenchError(f"steps must be >= 1 and warmup >= 0, got {self.steps}, {self.warmup}")
        if self.device_type not in ("cpu", "gpu"):
            raise BenchError(f"device type must be cpu or gpu, got {self.device_type!r}")
        if self.pull_schedule != "default" or self.trace_pulls:
            self._check_pulls()
        if self.sync is not None or self.slow_worker is not None:
            self._check_sync()
        self._check_device_cpus()
        if self.data not in DATA:
            raise BenchError(f"unknown data {self.data!r}; choose from {', '.join(DATA)}")
        if self.data == "digits" and self.num_classes != 10:
            raise BenchError(f"the digits have 10 classes: use --num-classes 10 with --data "
                             f"digits, got {self.num_classes}")
        self._resolve_sizes()

    def _resolve_sizes(self) -> None:
        """Fill in the model's default image and batch sizes; check the image size."""
        image, batch = model_sizes(self.model, self.image_size, self.batch_size)
        object.__setattr__(self, "image_size", image)
        object.__setattr__(self, "batch_size", batch)

    def _check_device_cpus(self) -> None:
        """One spelling: 'auto', 'shared', a word of the attached device watcher
        (:mod:`ralp.emulation.watchers`) or a positive number of CPUs ('0.45')."""
        text = str(self.device_cpus).strip().lower()
        if text != SHARED_CPUS and not default_share(text):
            try:
                cpus = float(text)
            except ValueError:
                cpus = float("nan")
            if not cpus > 0 or cpus == float("inf"):
                raise BenchError(f"--device-cpus {self.device_cpus!r}: {choices()}")
            text = f"{cpus:g}"
        object.__setattr__(self, "device_cpus", text)

    def _check_stanza(self) -> None:
        if self.ps < 1 or self.ps > self.workers:
            raise BenchError(
                f"mode {self.mode!r} needs at least one FC rank and no more FC ranks than CONV ranks "
                f"(each FC rank serves a group of CONV ranks), got {self.workers} CONV and "
                f"{self.ps} FC ranks of {self.workers + self.ps}: ask for --fc-workers between 1 "
                f"and {(self.workers + self.ps) // 2}"
            )
        if self.device_type != "cpu":
            raise BenchError(f"mode {self.mode!r} runs on the CPU: ralp's Horovod build has Gloo "
                             "only (no NCCL); use --device-type cpu")

    def _check_sync(self) -> None:
        from ralp.ps_strategy.staleness import SyncError, SyncPolicy
        from ralp.ps_strategy.sync import SlowWorker, check_slow_worker

        if not registry.MODES[self.mode].has_ps:
            raise BenchError("--sync and --slow-worker are for the PS modes (Horovod, Stanza "
                             "and collective are BSP by construction)")
        try:
            policy = SyncPolicy.parse(self.sync) if self.sync else None
            slow = SlowWorker.parse(self.slow_worker) if self.slow_worker else None
        except SyncError as e:
            raise BenchError(str(e)) from None
        try:
            check_slow_worker(slow, self.workers)
        except SyncError as e:
            raise BenchError(f"--slow-worker {self.slow_worker}: {e}") from None
        if policy is not None:  # one spelling in records: "ssp:3", "dssp:3:15"
            object.__setattr__(self, "sync", policy.spec)

    def _check_pulls(self) -> None:
        from ralp.placement.pull_schedule import SCHEDULES

        if not registry.MODES[self.mode].has_ps:
            raise BenchError("--pull-schedule and --trace-pulls are for the PS modes (Horovod, "
                             "Stanza and collective have no parameter server to pull from)")
        if self.pull_schedule not in SCHEDULES:
            raise BenchError(f"unknown pull schedule {self.pull_schedule!r}; choose from "
                             f"{', '.join(SCHEDULES)}")

    @classmethod
    def for_devices(cls, model: str, mode: str, devices: int, fc_workers: int = 1,
                    **workload) -> RunSpec:
        workers, ps = resources(mode, devices, fc_workers)
        return cls(model, mode, devices, workers, ps, **workload)

    @property
    def measured_steps(self) -> int:
        return self.steps * self.workers

    @property
    def warmup_steps(self) -> int:
        return max(self.warmup, 1) * self.workers

    @property
    def label(self) -> str:
        sync = f" {self.sync}" if self.sync else ""
        pulls = f" {self.pull_schedule}" if self.pull_schedule != "default" else ""
        mode = f"auto->{self.mode}" if self.auto else self.mode
        cpus = f" cpus={self.device_cpus}" if self.device_cpus != AUTO_CPUS else ""
        return (f"{self.model} {mode}{sync}{pulls} N={self.devices} ({self.workers}+{self.ps})"
                f"{cpus}")

    def to_dict(self) -> dict:
        """The spec's fields (``auto`` only for a run mode auto chose: records stay as they were)."""
        out = asdict(self)
        if out["auto"] is None:
            del out["auto"]
        return out


def model_sizes(model: str, image_size: int | None, batch_size: int | None) -> tuple[int, int]:
    """(image size, batch size) of a run of zoo model ``model``: the ones given, else the
    benchmark's defaults; an image too small for the model's strides and pools raises
    :class:`BenchError`. Needs no TensorFlow (the zoo's table, :mod:`ralp.models.zoo`)."""
    from ralp.models import get_model_spec
    from ralp.models.model_file import DEFAULT_FILE_BATCH_SIZE, is_model_file

    if is_model_file(model):  # its own input side (checked when the file is read)
        return image_size or 0, batch_size or DEFAULT_FILE_BATCH_SIZE
    try:
        spec = get_model_spec(model)
    except ValueError as e:
        raise BenchError(str(e)) from None
    image = image_size or spec.default_image_size
    if image < spec.min_image_size:
        raise BenchError(f"{model} needs --image-size >= {spec.min_image_size} "
                         f"(its strides and pools), got {image}")
    return image, batch_size or spec.default_batch_size
