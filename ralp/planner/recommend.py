"""What a planner command plans for (a zoo model or a saved Keras model) and its plan, from
the planner's core (:mod:`ralp.planner.cluster_report`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from ralp._cli import UsageError
from ralp.defaults import DEFAULT_BATCH_SIZE
from ralp.planner.workload import Workload


@dataclass(frozen=True)
class Subject:
    """The model a CLI plan is for: its name, batch, input side and classes (a saved model's
    own), its workload and, for a saved model, the model and its file."""

    name: str
    batch: int
    image: int
    classes: int
    work: Workload
    model: object = None
    source: str = ""


def subject(args, workload_for: Callable[[str, int, int, int], Workload]) -> Subject:
    """The zoo model or saved Keras model ``args`` name."""
    from ralp.models import get_model_spec
    from ralp.planner.calibration import shape_facts
    from ralp.profiler.api import profile

    if args.model is None and args.keras_model is None:
        raise UsageError("say which model: --model NAME or --keras-model PATH")
    if args.model is not None:
        spec = get_model_spec(args.model)
        batch = args.batch_size or spec.default_batch_size
        image = args.image_size or spec.default_image_size
        return Subject(args.model, batch, image, args.num_classes,
                       workload_for(args.model, batch, image, args.num_classes),
                       source=args.model)
    from ralp.profiler.cli import load_keras_model

    model = load_keras_model(args.keras_model)
    batch = args.batch_size or DEFAULT_BATCH_SIZE
    image, classes = shape_facts(model)  # the model's own input side and classes
    return Subject(model.name, batch, image, classes,
                   Workload(profile(model, batch, threshold=args.threshold)), model,
                   args.keras_model)


def cluster_cli(args, workload_for: Callable[[str, int, int, int], Workload]) -> str:
    """The plan for a real cluster of ``--nodes`` (:mod:`ralp.planner.cluster_report`)."""
    from ralp.planner.calibration import Calibration
    from ralp.planner.cluster_report import cluster_answer as report

    s = subject(args, workload_for)
    compute = None
    if args.compute_profile:
        compute = Calibration.load(args.compute_profile).find(s.name, s.batch, s.image,
                                                              s.classes).compute
    return report(args, s.work, s.source, compute)


def recommend_cli(args, workload_for: Callable[[str, int, int, int], Workload]) -> str:
    """The plan for ``--devices`` machines of one device each: the device's compute from
    ``--device-throughput``, ``--compute-profile``, or measured here first."""
    from ralp.planner.calibration import Calibration, measure
    from ralp.planner.cluster_report import cluster_answer as report
    from ralp.planner.modes import PlannerError

    s = subject(args, workload_for)
    if args.device_throughput is not None:  # the user's own device, on a real cluster
        if args.compute_profile:
            raise UsageError("--device-throughput is one GPU's measured throughput: drop "
                             "--compute-profile (or give that instead)")
        return report(args, s.work, s.source, None, nodes=args.devices)
    entry = None
    if args.compute_profile:
        calibration = Calibration.load(args.compute_profile)  # a bad file is refused
        try:
            entry = calibration.find(s.name, s.batch, s.image, s.classes)
        except PlannerError:
            entry = None  # not this model: measured here
    if entry is None:  # measure it here, now (a few steps in this process)
        entry = measure_here(args, s, measure)
    return report(args, s.work, s.source, entry.compute, nodes=args.devices)


def measure_here(args, s: Subject, measure):
    from ralp._text import human_seconds
    from ralp.models import build_model

    started = time.perf_counter()
    model = s.model if s.model is not None else build_model(s.name, s.classes, s.image)
    work = s.work
    entry = measure(model, s.batch, tuple(r.name for r in work.table.rows), work.offloaded,
                    model_name=s.name, image_size=s.image, num_classes=s.classes,
                    split_after=work.profile.candidate_split_after)
    keep = ("" if args.model is None else f"; to plan again without measuring: python -m "
            f"ralp.planner --calibrate --model {s.name} --batch-size {s.batch} --image-size "
            f"{s.image} --output cal.json, then --compute-profile cal.json")
    print(f"measured {s.name} here (batch {s.batch}, {s.image} px): whole model "
          f"{human_seconds(entry.full_s)}, tail {human_seconds(entry.tail_s)} per step, in "
          f"{time.perf_counter() - started:.0f} s{keep}", file=sys.stderr)
    return entry
