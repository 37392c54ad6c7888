"""Does ``ralp.wrap``'s mode "auto" order plain PS and RALP as they measure, on the user's own
``LocalCluster(workers=2, ps=1)`` (its tasks sharing this host), for models ralp does not
ship? And where the decision rules disagree, which one picked the faster mode?

Per model, each round: the prediction ``wrap`` makes with the defaults (no calibration: the
model's FLOPs at this host's probed rates; the assumed link) in a fresh process, then modes
ps and ralp trained in turn (each a fresh coordinator on a fresh cluster; the order rotated
each round), ``--epochs`` epochs of ``--steps`` updates on random images, each run's
images/s the median of its epochs after the first. Beside the measurement, the choice on the
same prediction under each decision margin compared (RALP when predicted faster by more than
the margin and moving enough fewer bytes; else plain PS, which needs less).

    .venv/bin/python -m lab.tools.auto_local --repeat 2 --out auto_local.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

IMAGE, CLASSES = 64, 10
MODELS = ("convnet-fc", "vgg-mini", "residual-gap", "mobilenetv3small", "mobilenetv2-035")


def build(name: str):
    """A model ralp does not ship: two FC-heavy, three conv-heavy."""
    import keras
    from keras import layers

    keras.utils.set_random_seed(0)
    shape = (IMAGE, IMAGE, 3)
    if name == "mobilenetv3small":
        return keras.applications.MobileNetV3Small(weights=None, input_shape=shape,
                                                   classes=CLASSES)
    if name == "mobilenetv2-035":
        return keras.applications.MobileNetV2(weights=None, input_shape=shape, alpha=0.35,
                                              classes=CLASSES)
    inputs = keras.Input(shape)
    if name == "convnet-fc":  # the keras.io convnet's shape, with a wide head
        x = layers.Conv2D(32, 3, activation="relu")(inputs)
        x = layers.MaxPooling2D()(x)
        x = layers.Conv2D(64, 3, activation="relu")(x)
        x = layers.MaxPooling2D()(x)
        x = layers.Flatten()(x)
        x = layers.Dense(1024, activation="relu")(x)
        x = layers.Dense(512, activation="relu")(x)
    elif name == "vgg-mini":
        x = inputs
        for filters in (32, 64, 128, 128):
            x = layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
            x = layers.MaxPooling2D()(x)
        x = layers.Flatten()(x)
        x = layers.Dense(2048, activation="relu")(x)
    elif name == "residual-gap":
        x = layers.Conv2D(32, 3, strides=2, padding="same")(inputs)
        for filters in (64, 128, 256):
            shortcut = layers.Conv2D(filters, 1, strides=2, padding="same")(x)
            x = layers.SeparableConv2D(filters, 3, padding="same", activation="relu")(x)
            x = layers.BatchNormalization()(x)
            x = layers.SeparableConv2D(filters, 3, padding="same")(x)
            x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
            x = layers.add([x, shortcut])
        x = layers.GlobalAveragePooling2D()(x)
        x = layers.Dense(256, activation="relu")(x)
    else:
        raise ValueError(f"unknown model {name!r}")
    outputs = layers.Dense(CLASSES, activation="softmax")(x)
    return keras.Model(inputs, outputs, name=name.replace("-", "_"))


def _compiled(name: str):
    model = build(name)
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def predict_job(spec_json: str, name: str, batch: int) -> dict:
    """In a fresh process: what ``wrap``'s auto predicts and chooses for the cluster."""
    from ralp.cluster.spec import ClusterSpec
    from ralp.planner.auto import estimate_for_cluster

    spec = ClusterSpec.from_dict(json.loads(spec_json))
    choice = estimate_for_cluster(_compiled(name), spec, batch_size=batch)
    return {"chosen": choice.mode, "images_per_sec": dict(choice.predicted_images_per_sec),
            "bytes_per_step": dict(choice.bytes_per_step or {}), "source": choice.calibration,
            "links": choice.bandwidth}


def train_job(spec_json: str, name: str, mode: str, batch: int, steps: int,
              epochs: int) -> dict:
    """In a fresh coordinator process: ``wrap`` with the defaults, then ``fit``."""
    import numpy as np

    import ralp
    from ralp.cluster.spec import ClusterSpec

    rng = np.random.default_rng(0)
    x = rng.random((batch * steps, IMAGE, IMAGE, 3), dtype=np.float32)
    y = rng.integers(0, CLASSES, batch * steps)
    trainer = ralp.wrap(_compiled(name), ClusterSpec.from_dict(json.loads(spec_json)),
                        mode=mode, batch_size=batch)
    history = trainer.fit(x, y, batch_size=batch, epochs=epochs, verbose=0)
    rates = list(history.images_per_second)
    return {"trained_as": trainer.mode, "images_per_sec": statistics.median(rates[1:]),
            "epochs_images_per_sec": rates, "load": os.getloadavg()[0]}


def keras_job(name: str, batch: int, steps: int) -> dict:
    """In a fresh process: one Keras process's step on the model (``model.fit``, one epoch of
    ``steps`` after a warm-up epoch), the reference the FLOP estimate is read against."""
    import numpy as np

    model = _compiled(name)
    rng = np.random.default_rng(0)
    x = rng.random((batch * steps, IMAGE, IMAGE, 3), dtype=np.float32)
    y = rng.integers(0, CLASSES, batch * steps)
    model.fit(x[:2 * batch], y[:2 * batch], batch_size=batch, epochs=1, verbose=0)
    began, cpu = time.perf_counter(), time.process_time()
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
    wall = time.perf_counter() - began
    return {"model": name, "step_s": wall / steps, "images_per_sec": batch * steps / wall,
            "busy_cores": (time.process_time() - cpu) / wall}


def in_fresh_cluster(job, *args, timeout: float) -> dict:
    from ralp import LocalCluster
    from ralp.cluster.fresh_process import ChildError, run_in_fresh_process

    try:
        with LocalCluster(workers=2, ps=1) as cluster:
            spec = json.dumps(cluster.spec.as_dict())
            return run_in_fresh_process(job, spec, *args, timeout=timeout)
    except ChildError as e:
        return {"error": str(e).splitlines()[0][:400]}


MARGINS = (0.02, 0.05, 0.15)  # the decision margins compared: wrap's old, the rule's, the old tie band


def rules(predicted: dict[str, float], bytes_per_step: dict[str, float]) -> dict[str, str]:
    """The choice on the same prediction under each decision margin of :data:`MARGINS`
    (RALP: predicted faster by more than the margin and moving enough fewer bytes)."""
    from ralp.planner.cluster_plan import MIN_BYTES_SAVED

    ps, ralp = predicted.get("ps"), predicted.get("ralp")
    saves = ralp is not None and \
        bytes_per_step["ralp"] < (1 - MIN_BYTES_SAVED) * bytes_per_step["ps"]
    return {f"margin {m:.0%}": "ralp" if saves and ralp > ps * (1 + m) else "ps"
            for m in MARGINS}


def one_round(name: str, round_index: int, args) -> list[dict]:
    rows = []
    began = time.time()
    predicted = in_fresh_cluster(predict_job, name, args.batch_size, timeout=args.timeout)
    modes = ("ps", "ralp") if round_index % 2 == 0 else ("ralp", "ps")
    measured = {m: in_fresh_cluster(train_job, name, m, args.batch_size, args.steps,
                                    args.epochs, timeout=args.timeout) for m in modes}
    row = {"model": name, "round": round_index, "batch_size": args.batch_size,
           "started": began, "predicted": predicted, "measured": measured}
    if "error" not in predicted:
        row["rules"] = rules(predicted["images_per_sec"], predicted["bytes_per_step"])
    rows.append(row)
    return rows


def line(row: dict) -> str:
    p, m = row["predicted"], row["measured"]
    pred = p.get("images_per_sec", {})
    cells = [f"{row['model']:<17} r{row['round']}"]
    for mode in ("ps", "ralp"):
        got = m[mode].get("images_per_sec")
        said = pred.get(mode)
        cells.append(f"{mode} measured {got:7.1f}" if got else f"{mode} {m[mode].get('error')}")
        cells.append(f"predicted {said:7.1f}" if said else "predicted -")
    cells.append(f"auto chose {p.get('chosen', p.get('error'))}")
    if "rules" in row:
        cells.append("rules " + ", ".join(f"{k} {v}" for k, v in row["rules"].items()))
    return "  ".join(cells)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.tools.auto_local",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=8, help="updates per epoch")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--timeout", type=float, default=1800.0, help="per run")
    p.add_argument("--out", help="JSON file of every round")
    p.add_argument("--keras", action="store_true",
                   help="instead: one Keras process's step on each model")
    args = p.parse_args(argv)
    if args.keras:
        from ralp.cluster.fresh_process import run_in_fresh_process

        for name in args.models:
            r = run_in_fresh_process(keras_job, name, args.batch_size, args.steps,
                                     timeout=args.timeout)
            print(f"{name:<17} one Keras process: step {r['step_s'] * 1e3:5.0f} ms, "
                  f"{r['images_per_sec']:6.1f} images/s, {r['busy_cores']:.2f} cores busy",
                  flush=True)
        return 0
    # wrap's probes (FLOP rates, the shared host) made once in this run, kept for its rounds
    with tempfile.TemporaryDirectory(prefix="ralp-auto-local-") as cache:
        os.environ["RALP_CACHE_DIR"] = cache
        rows = []
        for round_index in range(args.repeat):
            for name in args.models:
                for row in one_round(name, round_index, args):
                    rows.append(row)
                    print(line(row), flush=True)
                    if args.out:
                        Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
