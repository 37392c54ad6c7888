"""``python -m ralp.profiler``: will layer placement pay off for this model, and where to split?"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from ralp._cli import UsageError, fail, finite_float, positive_int, quiet_tensorflow
from ralp.defaults import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_PS,
    DEFAULT_THRESHOLD,
    DEFAULT_WORKERS,
)

PROG = "python -m ralp.profiler"
FORMATS = ("table", "json", "csv")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Profile a CNN from its shapes: layer table, parameter skewness, "
        "whether RALP layer placement is worth it, the split point, and bytes per step "
        "for plain PS, Horovod and RALP.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="a model of the zoo (see --list)")
    src.add_argument("--keras-model", metavar="PATH", help="a saved .keras model file")
    src.add_argument("--all", action="store_true", help="every zoo model, one summary table")
    src.add_argument("--list", action="store_true", help="list the zoo models and exit")
    p.add_argument("--batch-size", type=positive_int, help="per-worker batch (default: the "
                   f"model's benchmark default; {DEFAULT_BATCH_SIZE} for --keras-model)")
    p.add_argument("--num-classes", type=positive_int, default=1000,
                   help="1000 (ImageNet-1K, default) or 21841 (ImageNet-22K)")
    p.add_argument("--image-size", type=positive_int, help="scale the zoo model's input down")
    p.add_argument("--threshold", type=finite_float, default=None,
                   help=f"skewness threshold K: eligible iff S <= K (default {DEFAULT_THRESHOLD})")
    p.add_argument("--workers", type=positive_int, default=DEFAULT_WORKERS,
                   help=f"workers W for the byte model (default {DEFAULT_WORKERS})")
    p.add_argument("--ps", type=positive_int, default=DEFAULT_PS,
                   help=f"PS tasks M for the byte model (default {DEFAULT_PS})")
    p.add_argument("--format", choices=FORMATS, default="table")
    return p


def load_keras_model(path: str):
    if not os.path.isfile(path):
        raise UsageError(
            f"no such file: {path!r}; pass the path of a model saved with model.save('x.keras')"
        )
    if not os.access(path, os.R_OK):
        raise UsageError(f"cannot read {path!r}: permission denied")
    import keras

    try:
        return keras.models.load_model(path, compile=False)
    except Exception as e:  # Keras raises many types for bad files; say which file and why
        raise UsageError(
            f"could not load {path!r} as a Keras model ({type(e).__name__}: {e}). Save it with "
            "model.save('name.keras'); models with custom layers must be importable here."
        ) from e


def _profile_zoo(name: str, args, threshold: float):
    from ralp.models import build_model, get_model_spec
    from ralp.profiler.api import profile

    spec = get_model_spec(name)
    model = build_model(name, num_classes=args.num_classes, image_size=args.image_size)
    batch = args.batch_size or spec.default_batch_size
    return profile(model, batch, threshold=threshold, workers=args.workers, ps=args.ps)


def run(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from ralp.models import MODEL_NAMES  # the zoo's table: no TensorFlow yet

    if args.model is not None and args.model not in MODEL_NAMES:  # said at once
        return fail(PROG, f"unknown model {args.model!r}; choose one of: "
                          f"{', '.join(MODEL_NAMES)} (or pass --keras-model PATH)")
    if args.list:
        print("\n".join(MODEL_NAMES))
        return 0
    quiet_tensorflow()
    from ralp.profiler import render
    from ralp.profiler.layer_table import ProfileError

    threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    try:
        if args.all:
            profiles = []
            for name in MODEL_NAMES:
                profiles.append(_profile_zoo(name, args, threshold))
                _free_models()
            output = {
                "table": lambda: render.summary_text(profiles),
                "json": lambda: json.dumps([render.to_dict(p) for p in profiles], indent=2),
                "csv": lambda: render.summary_csv(profiles),
            }[args.format]()
        else:
            if args.model is not None:
                p = _profile_zoo(args.model, args, threshold)
            else:
                model = load_keras_model(args.keras_model)
                from ralp.profiler.api import profile

                p = profile(model, args.batch_size or DEFAULT_BATCH_SIZE, threshold=threshold,
                            workers=args.workers, ps=args.ps)
            output = {"table": render.to_text, "json": render.to_json, "csv": render.layers_csv}[
                args.format
            ](p)
    except (UsageError, ProfileError, ValueError) as e:
        return fail(PROG, str(e))
    sys.stdout.write(output if output.endswith("\n") else output + "\n")
    return 0


def _free_models() -> None:
    import keras

    keras.backend.clear_session(free_memory=True)


def main() -> None:
    sys.exit(run())
