"""``python -m ralp.planner.calibrate_cli``: one device's compute, measured into a calibration.

The user's ``python -m ralp.planner --calibrate`` runs :func:`calibrate` in this process. The
bench's ``--calibrate`` runs this command before each round, with ``--device-cpus CPUS
--devices N`` on the budgeted simulated cluster (the compute on one device inside its budget).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ralp._cli import UsageError, positive_int

PROG = "python -m ralp.planner.calibrate_cli"


def parser(p: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The calibration's options (added to ``p`` where given)."""
    p = p or argparse.ArgumentParser(prog=PROG, description="Calibrate one device: a model's "
                                     "step times, whole and split.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", help="a model of the zoo")
    src.add_argument("--keras-model", metavar="PATH", help="a saved .keras model file")
    p.add_argument("--batch-size", type=positive_int)
    p.add_argument("--image-size", type=positive_int)
    p.add_argument("--num-classes", type=positive_int, default=1000)
    p.add_argument("--devices", type=positive_int, nargs="+", default=[4],
                   help="with --device-cpus: the simulated cluster's devices")
    p.add_argument("--device-cpus", metavar="CPUS", help="measure on one device of the "
                   "budgeted simulated cluster of --devices N devices: 'auto' or CPUs")
    p.add_argument("--output", metavar="FILE", help="the calibration JSON to write "
                   "(entries of an existing file are kept)")
    p.add_argument("--steps", type=positive_int, default=None, help="timed steps")
    return p


def calibrate(args) -> str:
    """The calibration ``args`` ask for, written to ``--output``; returns its summary."""
    import os

    from ralp._text import human_seconds
    from ralp.defaults import DEFAULT_BATCH_SIZE
    from ralp.models import get_model_spec
    from ralp.planner.api import calibrate, calibrate_zoo
    from ralp.planner.calibration import DEFAULT_CALIBRATION_STEPS, Calibration

    if not args.output:
        raise UsageError("--calibrate needs --output FILE (the calibration JSON to write)")
    steps = args.steps or DEFAULT_CALIBRATION_STEPS
    device_cpus = getattr(args, "device_cpus", None)
    devices = (getattr(args, "devices", None) or [4])[0]
    if args.model is not None:
        spec = get_model_spec(args.model)
        batch = args.batch_size or spec.default_batch_size
        image = args.image_size or spec.default_image_size
        new = calibrate_zoo(args.model, batch, image, args.num_classes, steps=steps,
                            device_cpus=device_cpus, devices=devices)
        name = args.model
    elif args.keras_model is not None:
        from ralp.profiler.cli import load_keras_model

        if device_cpus is not None:
            new = calibrate_zoo(args.keras_model, args.batch_size or DEFAULT_BATCH_SIZE,
                                *_shape(args.keras_model), steps=steps,
                                device_cpus=device_cpus, devices=devices)
        else:
            new = calibrate(load_keras_model(args.keras_model),
                            args.batch_size or DEFAULT_BATCH_SIZE, steps=steps)
        name, batch, image = new.entries[0].model, new.entries[0].batch_size, new.entries[0].image_size
    else:
        raise UsageError("--calibrate needs --model NAME (a zoo model) or --keras-model PATH")
    entry = new.entries[0]
    if os.path.exists(args.output):
        new = Calibration.load(args.output).merged(new)
    new.save(args.output)
    return (f"{name} batch {batch} image {image}: whole model {human_seconds(entry.full_s)}, "
            f"tail (after {entry.split_after}) {human_seconds(entry.tail_s)} per step, on "
            f"{new.machine}; wrote {args.output}")


def _shape(path: str) -> tuple[int, int]:
    """(image size, classes) of the saved model at ``path``."""
    from ralp.planner.calibration import shape_facts
    from ralp.profiler.cli import load_keras_model

    return shape_facts(load_keras_model(path))


def main(argv: Sequence[str] | None = None) -> int:
    from ralp.planner.command import run_command

    return run_command(argv, PROG, parser=lambda prog: parser(), work=calibrate)


if __name__ == "__main__":
    sys.exit(main())
