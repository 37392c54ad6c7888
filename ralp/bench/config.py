"""What the bench was asked to do, resolved once: the request, its defaults, the run matrix and
the backend.

The CLI only parses; a :class:`BenchRequest` holds what was asked. From it come the run specs
(:meth:`BenchRequest.runs`: models x devices x modes x sync paradigms, each a resolved
:class:`~ralp.bench.runspec.RunSpec`), the backend (:meth:`BenchRequest.backend_choice`: netns
where this machine allows it, else local, with the reason) and, for a real cluster, its spec.
Without ``--models`` the bench runs the small embedded comparison, :data:`DEFAULT_COMPARISON`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ralp import modes as registry
from ralp.bench.runspec import (
    AUTO_CPUS,
    DEFAULT_STEPS,
    DEFAULT_WARMUP,
    MODES,
    BenchError,
    RunSpec,
    model_sizes,
)
from ralp.cluster.spec import ClusterError, ClusterSpec
from ralp.defaults import DEFAULT_BANDWIDTH

NO_PS_MODES = registry.NO_PS_MODES  # no PS cluster: no sync or pull options


@dataclass(frozen=True)
class DefaultComparison:
    """The small comparison ``python -m ralp.bench`` runs with no arguments: FC-heavy alexnet
    (most of its parameters in the layers RALP offloads) against googlenet (most in
    convolutions), scaled down so a 2-core machine runs it in a few minutes on budgeted
    devices."""

    models: tuple[str, ...] = ("alexnet", "googlenet")
    # horovod and stanza only where Horovod is installed
    modes: tuple[str, ...] = (registry.PS, registry.RALP_N, registry.HOROVOD, registry.STANZA)
    devices: tuple[int, ...] = (4,)
    image_size: dict[str, int] = field(default_factory=lambda: {"alexnet": 67, "googlenet": 32})
    batch_size: int = 8
    steps: int = 5  # measured steps per worker
    warmup: int = 1  # per worker: the step that instantiates its graph is not measured


DEFAULT_COMPARISON = DefaultComparison()
AUTO = registry.AUTO  # --modes auto: the planner's choice (ralp.bench.mode_choice resolves it)
# (model, devices, workload fields) -> (chosen mode, the record's ``auto`` field)
ChooseMode = Callable[[str, int, dict], tuple[str, dict]]
SCENARIOS = ("all-ps", "all-ralp", "mixed")


@dataclass(frozen=True)
class BenchRequest:
    """Every option of ``python -m ralp.bench``; None means "not given"."""

    models: tuple[str, ...] | None = None
    modes: tuple[str, ...] | None = None
    devices: tuple[int, ...] | None = None
    workers: int | None = None
    ps: int | None = None
    fc_workers: int | str | None = None  # mode stanza: FC ranks per job (default 1), or auto
    batch_size: int | None = None
    num_classes: int | None = None
    data: str = "synthetic"
    image_size: int | None = None
    steps: int | None = None
    warmup: int | None = None
    device_type: str = "cpu"
    backend: str = "auto"
    bandwidth: str | None = None
    latency: str | None = None
    sync: tuple[str, ...] | None = None
    slow_worker: str | None = None
    pull_schedules: tuple[str, ...] | None = None
    trace_pulls: bool = False
    hostfile: str | None = None
    cluster_file: str | None = None
    jobs: int | None = None
    scenarios: tuple[str, ...] | None = None
    compute_profile: str | None = None  # mode auto: the planner's calibration JSON
    # calibrate each workload before its runs (ralp.bench.calibrated): each record's compute
    # bound; off on tf-config (another host's devices) and for consolidation jobs
    calibrate: bool = True
    device_cpus: tuple[str, ...] | None = None  # CPUs per simulated device, each a run
    repeat: int = 1  # rounds of the whole matrix, the order rotated each round
    # netns: 'auto' (the links dilated by the host's pace, measured; ralp.bench.pace), 'off',
    # or a dilation factor given
    dilation: str | float = "auto"

    @property
    def is_default_comparison(self) -> bool:
        """No models named: the embedded comparison's workload fills what was not asked."""
        return self.models is None

    def model_names(self) -> list[str]:
        from ralp.models import MODEL_NAMES
        from ralp.models.model_file import is_model_file

        models = list(self.models or DEFAULT_COMPARISON.models)
        unknown = [m for m in models if m not in MODEL_NAMES and not is_model_file(m)]
        if unknown:
            raise BenchError(f"unknown model(s) {unknown}; the zoo has {', '.join(MODEL_NAMES)} "
                             "(or pass --keras-model FILE.keras)")
        return models

    def mode_names(self, horovod_missing: str | None = None) -> list[str]:
        """The modes asked for; by default the comparison's, where Horovod is missing
        (``horovod_missing`` says why) with collective (TensorFlow's own allreduce) in
        horovod's place and without stanza."""
        if self.modes is not None and AUTO in self.modes:
            self._check_auto()
            return [AUTO]
        if self.compute_profile and self.fc_workers != AUTO:
            raise BenchError("--compute-profile is for --modes auto and --fc-workers auto (the "
                             "planner's choice)")
        if self.modes is not None:
            unknown = [m for m in self.modes if m not in MODES]
            if unknown:
                raise BenchError(f"unknown mode(s) {unknown}; choose from "
                                 f"{', '.join((*MODES, AUTO))}")
            return list(self.modes)
        modes = list(DEFAULT_COMPARISON.modes)
        if not horovod_missing:
            return modes
        return [(registry.COLLECTIVE if m == registry.HOROVOD else m) for m in modes
                if m != registry.STANZA]

    def _check_auto(self) -> None:
        """Mode auto runs the planner's choice among the runtime's modes, as the planner
        models them: each mode's own resources and ParameterServerStrategy's scheduling."""
        if len(self.modes) > 1:
            raise BenchError(f"--modes auto runs the planner's choice on its own; to measure "
                             f"modes side by side, list them without auto (got "
                             f"{' '.join(self.modes)})")
        clashes = [name for name, given in (
            ("--workers/--ps", self.workers or self.ps), ("--fc-workers", self.fc_workers),
            ("--jobs", self.jobs),
            ("--sync", self.sync), ("--slow-worker", self.slow_worker),
            ("--pull-schedule", self.pull_schedules), ("--trace-pulls", self.trace_pulls),
            ("--device-type gpu", self.device_type != "cpu"),
        ) if given]
        if clashes:
            raise BenchError(f"--modes auto chooses a mode and its resources from the planner's "
                             f"predictions, which model N devices per mode, PSS's own "
                             f"scheduling on CPU; drop {', '.join(clashes)} or name the modes")

    def check_models(self) -> None:
        """Every model's name and image size, checked before anything imports TensorFlow
        (the zoo's table needs none): a bad one is said at once, not after the import."""
        for model in self.model_names():
            model_sizes(model, self.workload(model)["image_size"], None)

    def workload(self, model: str) -> dict:
        """RunSpec fields other than model and resources: what was asked, else the defaults."""
        default = self.is_default_comparison
        file_facts = _file_facts(model, self.image_size, self.num_classes, self.data)
        if file_facts:
            image, classes = file_facts
            return {**self._workload_fields(model, default), "image_size": image,
                    "num_classes": classes}
        return self._workload_fields(model, default)

    def _workload_fields(self, model: str, default: bool) -> dict:
        return dict(
            batch_size=self.batch_size or (DEFAULT_COMPARISON.batch_size if default else None),
            image_size=self.image_size
            or (DEFAULT_COMPARISON.image_size.get(model) if default else None),
            num_classes=self.num_classes or (10 if self.data == "digits" else 1000),
            data=self.data,
            slow_worker=self.slow_worker,
            steps=self.steps or (DEFAULT_COMPARISON.steps if default else DEFAULT_STEPS),
            warmup=self.warmup or (DEFAULT_COMPARISON.warmup if default else DEFAULT_WARMUP),
            device_type=self.device_type,
        )

    def runs(self, modes: list[str], choose: ChooseMode | None = None,
             assign: ChooseMode | None = None) -> list[RunSpec]:
        """The run matrix: every model x device count x mode x sync paradigm, in that order.
        Mode auto is resolved here, once per (model, N, device budget), by ``choose``; ``--fc-workers auto``
        by ``assign`` (the planner's choice among stanza's splits)."""
        if self.sync and not set(modes) - set(NO_PS_MODES):
            raise BenchError("--sync is for the PS modes (ps, ralp-h, ralp-n); Horovod, "
                             "Stanza and collective are synchronous by construction")
        if self.fc_workers and registry.STANZA not in modes:
            raise BenchError("--fc-workers is for mode stanza (its FC ranks)")
        runs = []
        for model in self.model_names():
            for n in self.devices or DEFAULT_COMPARISON.devices:
                for cpus in self.cpu_budgets(n):
                    for mode in modes:
                        runs += self._mode_runs(model, mode, n, cpus, choose, assign)
        return runs

    def _mode_runs(self, model: str, mode: str, n: int, cpus: str, choose, assign) -> list:
        if mode == AUTO:
            return [self._auto_run(model, n, choose, cpus)]
        ps_mode = mode not in NO_PS_MODES
        syncs = list(self.sync) if self.sync and ps_mode else [None]
        pulls = list(self.pull_schedules or ["default"]) if ps_mode else ["default"]
        return [replace(self._run(model, mode, n, sync, pull, assign, cpus), device_cpus=cpus)
                for sync in syncs for pull in pulls]

    def cpu_budgets(self, devices: int) -> list[str]:
        """The ``--device-cpus`` values (default: the measured default budget), each checked
        against this host for ``devices`` devices; a real cluster has no budgets."""
        from ralp.emulation.budget import device_cpus

        asked = list(self.device_cpus or [AUTO_CPUS])
        if self.backend == "tf-config":
            if self.device_cpus:
                raise BenchError("--device-cpus budgets a simulated cluster's devices; a real "
                                 "cluster's (tf-config) are its own")
            return asked
        for value in asked:
            try:
                device_cpus(value, devices)
            except ClusterError as e:
                raise BenchError(str(e)) from None
        return asked

    def _run(self, model: str, mode: str, devices: int, sync: str | None,
             pull_schedule: str = "default", assign: ChooseMode | None = None,
             cpus: str = AUTO_CPUS) -> RunSpec:
        workload = {**self.workload(model), "sync": sync, "pull_schedule": pull_schedule,
                    "trace_pulls": self.trace_pulls and mode not in NO_PS_MODES}
        family = registry.MODES[mode].family if mode in registry.MODES else None
        split = family == registry.LAYER_SPLIT
        if self.workers and family == registry.ALLREDUCE:
            return RunSpec(model, mode, self.workers, self.workers, 0, **workload)
        if split and self.fc_workers == AUTO:
            if assign is None:
                raise BenchError("--fc-workers auto needs the planner (ralp.bench.mode_choice)")
            _, why = assign(model, devices, {**workload, "device_cpus": cpus})
            return RunSpec.for_devices(model, mode, devices, why["fc_workers"], auto=why,
                                       **workload)
        if split and not (self.workers or self.ps):
            return RunSpec.for_devices(model, mode, devices, self.fc_workers or 1, **workload)
        if self.workers or self.ps:
            w, ps = self.workers or 1, self.ps or 1
            return RunSpec(model, mode, w + ps, w, ps, **workload)
        return RunSpec.for_devices(model, mode, devices, **workload)

    def _auto_run(self, model: str, devices: int, choose: ChooseMode | None,
                  cpus: str = AUTO_CPUS) -> RunSpec:
        if choose is None:
            raise BenchError("mode auto needs the planner to choose (ralp.bench.mode_choice)")
        workload = {**self.workload(model), "device_cpus": cpus}  # each budget its own choice
        mode, why = choose(model, devices, workload)
        return RunSpec.for_devices(model, mode, devices, why.get("fc_workers", 1), auto=why,
                                   **workload)

    def backend_choice(self) -> tuple[str, str | None]:
        """(backend, why netns was not chosen): ``auto`` is netns where it works, else local."""
        if self.backend != "auto":
            return self.backend, None
        from ralp.emulation.iproute import netns_unavailable_reason

        reason = netns_unavailable_reason()
        return ("local", reason) if reason else ("netns", None)

    def link_bandwidth(self, backend: str) -> str | None:
        """The simulated links' rate: as asked, or the default on netns."""
        if backend == "netns" and self.bandwidth is None:
            return DEFAULT_BANDWIDTH
        return self.bandwidth

    def cluster_spec(self) -> ClusterSpec:
        """The running cluster of the tf-config backend: ``--cluster FILE`` or ``TF_CONFIG``."""
        if self.cluster_file:
            try:
                with open(self.cluster_file) as f:
                    return ClusterSpec.from_dict(json.load(f))
            except OSError as e:
                raise BenchError(f"cannot read --cluster {self.cluster_file!r}: {e.strerror}") from None
            except json.JSONDecodeError as e:
                raise BenchError(f"--cluster {self.cluster_file!r} is not JSON: {e}") from None
        spec, job, _ = ClusterSpec.from_tf_config(os.environ.get("TF_CONFIG"))
        if job != "chief":
            raise ClusterError(f"TF_CONFIG says this is task {job!r}; run the bench as the 'chief' "
                               "(each other host runs python -m ralp.server)")
        return spec


def _file_facts(model: str, image_size: int | None, num_classes: int | None,
                data: str) -> tuple[int, int] | None:
    """(input side, classes) of a model given as a saved ``.keras`` file, checked against
    what was asked (None for a zoo model)."""
    from ralp.models.model_file import file_facts, is_model_file
    from ralp.profiler.trainable import outputs_refusal

    if not is_model_file(model):
        return None
    try:
        facts = file_facts(model)
    except ValueError as e:
        raise BenchError(str(e)) from None
    refusal = outputs_refusal(facts.name, facts.outputs)
    if refusal is not None:  # said once, as ralp.wrap would say it in every run
        raise BenchError(f"{model}: {refusal}")
    image, classes = facts.image, facts.classes
    if image_size not in (None, image) or num_classes not in (None, classes):
        raise BenchError(f"{model} takes {image} px images and has {classes} classes: leave "
                         "--image-size and --num-classes out for a model file")
    if data == "digits" and classes != 10:
        raise BenchError(f"--data digits has 10 classes; {model} has {classes}")
    return image, classes
