"""``keras.applications`` networks trained as a user would: two epochs of scikit-learn's digits
at 64 px, in modes ps, ralp and auto on ``LocalCluster(workers=2, ps=1)`` with the default
``ralp.Failures``, beside one Keras process on the same data (``model.fit``, same batch,
optimizer and epochs).

Per run: the first update's time (from ``fit``'s call to the first update seen finished:
tracing, the data and the graph sent to the workers, their graph optimization and the step),
each epoch's seconds and images/s (ralp's history), the final loss and accuracy, and the
host's load. Keras: each epoch's seconds (its first includes tracing), images/s and loss.
Each run is a fresh coordinator process on a fresh cluster; the networks take turns, each
network's modes interleaved with its Keras run (``--repeat`` rounds). Mode ``collective``
(asked for by name) runs two workers of a ``TF_CONFIG`` job on this host, each with the
default ``ralp.Failures`` (its ``step_timeout`` is each collective's timeout); its row is
worker 0's, with both workers' first updates.

    python -m lab.tools.real_networks --out lab/results/real-networks/real_networks.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

NETWORKS = {
    "efficientnetb0": "EfficientNetB0",
    "mobilenetv3small": "MobileNetV3Small",
    "resnet50v2": "ResNet50V2",
    "densenet121": "DenseNet121",
    "convnexttiny": "ConvNeXtTiny",
}
IMAGE, CLASSES, BATCH, EPOCHS = 64, 10, 32, 2


def digits(samples: int):
    """``samples`` digits at ``IMAGE`` px x 3 channels (float32 in [0, 1]) and their labels."""
    import numpy as np

    from ralp.models.digits import digits_arrays, to_model_input

    images, labels = digits_arrays(seed=0)
    x = np.asarray(to_model_input(images[:samples], IMAGE), np.float32)
    return x, labels[:samples]


def build(name: str):
    import keras

    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, NETWORKS[name])(
        weights=None, input_shape=(IMAGE, IMAGE, 3), classes=CLASSES)
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def ralp_run(spec_json: str, network: str, mode: str, samples: int) -> dict:
    """In a fresh coordinator process: ``ralp.wrap`` with the defaults, then ``fit``."""
    import ralp
    from ralp.cluster.spec import ClusterSpec

    out = {"network": network, "mode": mode, "load_before": os.getloadavg()[0]}
    model = build(network)
    x, y = digits(samples)
    began = time.perf_counter()
    trainer = ralp.wrap(model, ClusterSpec.from_dict(json.loads(spec_json)), mode=mode)
    out["wrap_s"] = time.perf_counter() - began
    out["trained_as"] = trainer.mode
    began = time.perf_counter()
    history = trainer.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0)
    out["fit_s"] = time.perf_counter() - began
    out["first_step_s"] = history.step_end_times[0] - began
    out["epoch_s"] = list(history.epoch_seconds)
    out["images_per_s"] = list(history.images_per_second)
    out["loss"] = list(history.history["loss"])
    out["accuracy"] = list(history.history["accuracy"])
    out["updates"] = len(history.step_end_times)
    out["load_after"] = os.getloadavg()[0]
    return out


def keras_run(network: str, samples: int) -> dict:
    """One Keras process: ``model.fit`` on the same data, batch and epochs."""
    import keras

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.began = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            seconds.append(time.perf_counter() - self.began)

    seconds: list[float] = []
    out = {"network": network, "mode": "keras", "load_before": os.getloadavg()[0]}
    model = build(network)
    x, y = digits(samples)
    history = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0, callbacks=[Clock()])
    out["epoch_s"] = seconds
    out["images_per_s"] = [samples / s for s in seconds]
    out["loss"] = list(history.history["loss"])
    out["accuracy"] = list(history.history["accuracy"])
    out["load_after"] = os.getloadavg()[0]
    return out


def collective_rank(network: str, samples: int, out: str) -> None:
    """One worker of a collective job (its ``TF_CONFIG`` set by the launcher): its run, to
    ``out``/rank<k>.json."""
    import ralp

    model = build(network)
    x, y = digits(samples)
    began = time.perf_counter()
    trainer = ralp.wrap(model, mode="collective")
    wrapped = time.perf_counter()
    history = trainer.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0)
    rank = trainer.runtime.rank
    result = {"network": network, "mode": "collective", "rank": rank,
              "wrap_s": wrapped - began, "first_step_s": history.step_end_times[0] - wrapped,
              "epoch_s": list(history.epoch_seconds),
              "images_per_s": list(history.images_per_second),
              "loss": list(history.history["loss"]),
              "accuracy": list(history.history["accuracy"]),
              "load_before": 0.0, "load_after": os.getloadavg()[0]}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


def collective_run(network: str, samples: int, timeout: float) -> dict:
    import tempfile

    from ralp.collective.launch import run_workers

    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ralp-real-networks-") as out:
        run_workers([sys.executable, "-m", "lab.tools.real_networks", "--rank-of", network,
                     str(samples), out], 2, timeout=timeout, env={"CUDA_VISIBLE_DEVICES": "-1"})
        ranks = [json.loads(Path(out, f"rank{k}.json").read_text()) for k in range(2)]
    result = dict(ranks[0], load_before=load)
    result["first_step_by_rank_s"] = [r["first_step_s"] for r in ranks]
    return result


def one(network: str, mode: str, samples: int, timeout: float) -> dict:
    from ralp import LocalCluster
    from ralp.cluster.fresh_process import ChildError, run_in_fresh_process
    from ralp.collective.runtime import CollectiveError

    try:
        if mode == "collective":
            return collective_run(network, samples, timeout)
        if mode == "keras":
            return run_in_fresh_process(keras_run, network, samples, timeout=timeout)
        with LocalCluster(workers=2, ps=1) as cluster:
            spec = json.dumps(cluster.spec.as_dict())
            return run_in_fresh_process(ralp_run, spec, network, mode, samples, timeout=timeout)
    except (ChildError, CollectiveError) as e:
        return {"network": network, "mode": mode, "error": str(e).splitlines()[0][:400]}


def row(r: dict) -> str:
    if "error" in r:
        return f"{r['network']:17} {r['mode']:6} ERROR {r['error']}"
    first = f"{r['first_step_s']:7.1f}" if "first_step_s" in r else "      -"
    epochs = " ".join(f"{s:6.1f}" for s in r["epoch_s"])
    rates = " ".join(f"{v:6.1f}" for v in r["images_per_s"])
    losses = " ".join(f"{v:6.3f}" for v in r["loss"])
    return (f"{r['network']:17} {r.get('trained_as', r['mode']):6} {first}  {epochs}  {rates}  "
            f"{losses}  acc {r['accuracy'][-1]:.3f}  load {r['load_before']:.1f}/"
            f"{r['load_after']:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(NETWORKS), choices=NETWORKS)
    parser.add_argument("--modes", nargs="+", default=["ps", "ralp", "auto", "keras"])
    parser.add_argument("--samples", type=int, default=512, help="digits per epoch")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3600.0, help="per run")
    parser.add_argument("--out", help="JSON file of every run")
    parser.add_argument("--rank-of", nargs=3, metavar=("NETWORK", "SAMPLES", "DIR"),
                        help=argparse.SUPPRESS)  # one worker of mode collective's job
    args = parser.parse_args()
    if args.rank_of:
        collective_rank(args.rank_of[0], int(args.rank_of[1]), args.rank_of[2])
        return 0
    print(f"{args.samples} digits at {IMAGE} px, batch {BATCH}, {EPOCHS} epochs; modes ps, "
          "ralp, auto on LocalCluster(workers=2, ps=1) with the default ralp.Failures\n"
          f"{'network':17} {'mode':6} {'first':>7}  {'epoch s':>13}  {'images/s':>13}  "
          f"{'loss':>13}", flush=True)
    runs = []
    for _ in range(args.repeat):
        for network in args.models:
            for mode in args.modes:
                r = one(network, mode, args.samples, args.timeout)
                runs.append(r)
                print(row(r), flush=True)
                if args.out:
                    with open(args.out, "w") as f:
                        json.dump({"argv": sys.argv, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
