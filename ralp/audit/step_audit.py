"""Running the placement audit: one real training step on a real (local) cluster.

:func:`audit` starts a :class:`LocalCluster` whose worker 0 dumps its step partitions, runs
:func:`audit_step` as the coordinator in a fresh process, and returns the report as a dict
(the JSON of ``python -m ralp.audit``).
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass

from ralp.cluster.fresh_process import ChildError, run_in_fresh_process
from ralp.cluster.local import LocalCluster
from ralp.modes import PS, RALP


@dataclass(frozen=True)
class AuditSettings:
    model: str
    mode: str = RALP  # ralp | ps
    workers: int = 1
    ps: int = 1
    image_size: int | None = None
    batch_size: int | None = None
    num_classes: int = 1000
    seed: int = 0
    sync: str | None = None  # None (ParameterServerStrategy's schedule) or "bsp"
    pulls: str = "default"  # how workers pull their variables: "default", "layer", "ibatch"


# gRPC's answer when a task could not read a request off the wire: a transport fault, not
# a placement; the audit runs again once on a new cluster.
TRANSPORT_FAULTS = ("Unable to parse request",)
AUDIT_ATTEMPTS = 2


def audit(settings: AuditSettings, timeout: float = 600.0) -> dict:
    """Audit ``settings.model`` on a fresh local cluster; returns the report.

    A step that fails on a transport fault (:data:`TRANSPORT_FAULTS`) is audited again on a
    new cluster, once, with a line on stderr; any other failure is raised as it is.
    """
    for _ in range(AUDIT_ATTEMPTS - 1):
        try:
            return _audit_on_new_cluster(settings, timeout)
        except ChildError as e:
            faults = [fault for fault in TRANSPORT_FAULTS if fault in str(e)]
            if not faults:
                raise
            print(f"ralp.audit: the step failed on a transport fault ({faults[0]!r}); "
                  "auditing again on a new cluster", file=sys.stderr)
    return _audit_on_new_cluster(settings, timeout)


def _audit_on_new_cluster(settings: AuditSettings, timeout: float) -> dict:
    from ralp.audit.analysis import dump_env

    with tempfile.TemporaryDirectory(prefix="ralp-audit-") as dump_dir:
        cluster = LocalCluster(
            settings.workers, settings.ps, task_env={"worker:0": dump_env(dump_dir)}
        )
        with cluster:
            return run_in_fresh_process(
                audit_step, cluster.spec, dump_dir, settings, timeout=timeout
            )


def audit_step(spec, dump_dir: str, settings: AuditSettings) -> dict:
    """In the coordinator process: place the model, run steps until worker 0 has run one,
    and analyse its partitions."""
    import keras

    from ralp._compat import slot_variables
    from ralp.audit.analysis import analyse
    from ralp.models import build_model, get_model_spec
    from ralp.placement.plan import Plan
    from ralp.wrapping import wrap

    model_spec = get_model_spec(settings.model)
    image_size = settings.image_size or model_spec.default_image_size
    batch = settings.batch_size or model_spec.default_batch_size
    keras.utils.set_random_seed(settings.seed)
    model = build_model(settings.model, settings.num_classes, image_size)
    synced = settings.sync == "bsp"  # the placement is planned for one worker's batch
    trainer = wrap(model, spec, mode=settings.mode, threshold=float("inf"), sync=settings.sync,
                   pulls=settings.pulls, batch_size=batch * (settings.workers if synced else 1))
    runtime = trainer.runtime
    plan, prof = trainer.plan, trainer.profile
    # The layers RALP moves; in ps mode, those it would move (the reference for "crossing").
    reference = plan if not plan.is_empty else Plan.from_profile(prof, settings.ps)
    function, partitions = _worker0_partitions(trainer, dump_dir, settings, image_size, batch)

    offloaded_top = {name.split("/")[0] for name in reference.offloaded}
    offloaded_vars = [v for layer in trainer.model.layers if layer.name in offloaded_top
                      for v in layer.variables]
    slots = [slot for opt in runtime.optimizers.values() for v in offloaded_vars
             for slot in slot_variables(opt, v)]
    handles = {id(v.value.handle) for v in offloaded_vars + slots}
    shapes = {tuple(v.shape) for v in offloaded_vars if len(v.shape) > 0}
    step = analyse(partitions, function.graph, [layer.name for layer in trainer.model.layers],
                   handles, shapes)
    return {
        "model": settings.model,
        "mode": PS if plan.is_empty else RALP,
        "workers": settings.workers,
        "ps": settings.ps,
        "batch_size": batch,
        "image_size": image_size,
        "num_classes": settings.num_classes,
        "offloaded_layers": list(plan.offloaded),
        "reference_layers": list(reference.offloaded),
        "plan": plan.to_dict(),
        "misplaced_ops": _misplaced_ops(step, plan, offloaded_top),
        **_byte_figures(step, prof.traffic(plan.offloaded), settings.workers),
        **_pull_figures(step, runtime),
        "sync": settings.sync, "pulls": settings.pulls,
        "layers": {
            layer: dict(step.layer_devices[layer])
            for layer in [*(x.name for x in trainer.model.layers), "(no layer)"]
            if layer in step.layer_devices
        },
        "crossings": [c.to_dict() for c in step.crossings],
        "unknown_size_crossings": step.unknown_size_crossings,
        "step_function": _name(function),
    }


def _worker0_partitions(trainer, dump_dir: str, settings: AuditSettings, image_size: int,
                        batch: int) -> tuple:
    """(the step's concrete function, worker 0's partition graphs of it): closures go to any
    free worker, so steps run until worker 0 has run one."""
    from ralp._compat import concrete_functions
    from ralp.audit.analysis import STEP_FUNCTION, read_partitions
    from ralp.models.synthetic import synthetic_dataset_fn

    dataset_fn = synthetic_dataset_fn(image_size, batch, settings.num_classes, settings.seed)
    partitions, function = {}, None
    runtime = trainer.runtime
    for _ in range(10):  # BSP: one round is a step of every worker
        trainer.fit(dataset_fn, steps_per_epoch=1 if runtime.bsp else settings.workers, verbose=0)
        functions = [f for f in concrete_functions(runtime.step_function)
                     if _name(f).startswith(STEP_FUNCTION)]
        if functions:
            function = functions[-1]
            partitions = read_partitions(dump_dir, _name(function))
        if partitions:
            return function, partitions
    raise RuntimeError(f"worker 0 wrote no partition graphs to {dump_dir}")


def _misplaced_ops(step, plan, offloaded_top: set[str]) -> list[dict]:
    """Ops of an offloaded layer that run anywhere but on the PS task its plan names."""
    from ralp.audit.analysis import task_of
    from ralp.placement.rewriter import layer_of_op

    misplaced = []
    for device, ops in step.ops_by_device.items():
        for op_name, op_type in ops:
            layer = layer_of_op(op_name, offloaded_top)
            if (
                layer is not None
                and plan.task_of(layer) is not None
                and task_of(device) != f"ps:{plan.task_of(layer)}"
            ):
                misplaced.append({"op": op_name, "type": op_type, "layer": layer, "device": device,
                                  "expected": f"ps:{plan.task_of(layer)}"})
    return misplaced


def _byte_figures(step, predicted, workers: int) -> dict:
    """The bytes the partition graphs move, per step of ``workers`` worker batches, beside
    the profiler's byte model (``predicted``)."""
    measured_per_step = step.crossing_bytes * workers
    return {
        "offloaded_variable_bytes_crossing": sum(
            c.nbytes or 0 for c in step.crossings if c.offloaded_variable
        ) * workers,
        "crossing_bytes_per_step": measured_per_step,
        "model_bytes_per_step": predicted.total,
        "crossing_to_model_ratio": measured_per_step / max(1, predicted.total),
        "crossing_bytes_per_worker_batch": step.crossing_bytes,
        "links_per_worker_batch": step.bytes_by_link(),
        "model_traffic": predicted.to_dict(),
    }


# a batched pull (ps_strategy/pulls.py): the batch's concat, or a one-variable batch's read
_PULL = re.compile(r"(^|/)ralp_pull_\d+(_\d+)?(_flat(_\d+)?)?(:\d+)?$")
_READ = re.compile(r"ReadVariableOp(:\d+)?$")  # a variable read on its own


def _pull_figures(step, runtime) -> dict:
    """The messages that bring the worker its variables, read from worker 0's partitions:
    packed pulls (iBatch, or one per layer: a batch's concat on its PS task; a batch of one
    variable is its read), and reads of single variables (ParameterServerStrategy's own, one
    per variable), beside the bytes of the variables the worker's layers hold."""
    found = [c for c in step.crossings if c.src_task.startswith("ps")
             and c.dst_task.startswith("worker") and c.dtype.startswith("float")
             and (_PULL.search(c.tensor) or _READ.search(c.tensor))]
    pulled = (*runtime.pulls.trainable, *runtime.pulls.non_trainable) if runtime.pulls else (
        runtime.split.head if runtime.split is not None else runtime.model).variables
    floating = [getattr(v, "value", v) for v in pulled]
    floating = [v for v in floating if v.dtype.is_floating]
    return {"pull_messages": len(found), "pull_bytes": sum(c.nbytes or 0 for c in found),
            "packed_messages": sum(1 for c in found if _PULL.search(c.tensor)),
            "pull_bytes_model": sum(v.shape.num_elements() * v.dtype.size for v in floating),
            "pulled_variables": len(floating), "pull_batches": len(runtime.plan.pull_batches)}


def _name(function) -> str:
    name = function.name
    return name.decode() if isinstance(name, bytes) else name
