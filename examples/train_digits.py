"""Train a small CNN on scikit-learn's digits with RALP on a local 2-worker, 1-PS cluster.

.venv/bin/python examples/train_digits.py [--mode skewness|auto|ralp|ps] [--epochs 5]
    [--checkpoint-dir DIR [--checkpoint-every STEPS]] [--tf-config]

--mode auto: the planner predicts plain PS and RALP on this cluster from a calibration taken
first (in this process: a few steps, a transfer, the host's contention) and trains the faster.
With --tf-config it runs as the chief of the cluster TF_CONFIG names (the one Kubeflow's
TFJob generates: examples/k8s/tfjob.yaml) instead of starting a local one. With
--checkpoint-dir it saves there, survives a lost PS once it is restarted, and a new run
with the same directory goes on where an interrupted one stopped.
"""

from __future__ import annotations

import argparse
import os

import ralp


def build_cnn():
    import keras

    x = inputs = keras.Input((8, 8, 1), name="digits")
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv1")(x)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv2")(x)
    x = keras.layers.MaxPooling2D(2, name="pool")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(256, activation="relu", name="fc1")(x)
    x = keras.layers.Dense(10, name="logits")(x)
    return keras.Model(inputs, x, name="digits_cnn")


def train(
    spec,
    mode: str,
    epochs: int,
    calibration=None,
    checkpoint_dir: str | None = None,
    checkpoint_every: int | None = None,
) -> dict:
    """The coordinator's job; it runs in a process of its own."""
    import keras
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype("float32")[..., None]
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, random_state=0
    )
    # mode auto predicts from the links' rate: loopback here, unshaped; say 10 Gbit/s
    auto = {"bandwidth": "10gbit", "calibration": calibration} if mode == "auto" else {}
    # Asynchronous steps apply gradients computed on weights a step or two old: a smaller
    # learning rate than one process would take keeps SGD with momentum steady.
    trainer = ralp.wrap(build_cnn(), spec, mode=mode, batch_size=32,
                        optimizer=keras.optimizers.SGD(0.02, momentum=0.9), **auto)
    if trainer.auto:
        print(trainer.auto.why)
    print(trainer.plan)
    history = trainer.fit(
        x_train,
        y_train,
        batch_size=32,
        epochs=epochs,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
    )
    test = trainer.evaluate(x_test, y_test, return_dict=True, verbose=0)
    return {
        "mode": trainer.mode,
        "train_loss": history.history["loss"],
        "accuracy": test["accuracy"],
        "failures": len(history.failures),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="skewness", choices=("skewness", "auto", "ralp", "ps"))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--checkpoint-dir", help="save checkpoints there and resume from them")
    parser.add_argument("--checkpoint-every", type=int, help="steps between checkpoints")
    parser.add_argument(
        "--tf-config", action="store_true", help="run as the chief of the cluster in TF_CONFIG"
    )
    args = parser.parse_args()
    calibration = None
    if args.mode == "auto":  # the model's compute, measured here first
        calibration = ralp.calibrate(build_cnn(), batch_size=32)
    job = (args.mode, args.epochs, calibration, args.checkpoint_dir, args.checkpoint_every)
    if args.tf_config:
        spec, task, _ = ralp.ClusterSpec.from_tf_config(os.environ.get("TF_CONFIG"))
        if task != "chief":
            parser.error(f"TF_CONFIG names a {task!r} task; run this on the chief")
        result = ralp.run_in_fresh_process(train, spec, *job)
    else:
        with ralp.LocalCluster(workers=2, ps=1) as cluster:
            result = ralp.run_in_fresh_process(train, cluster.spec, *job)
    print(f"mode {result['mode']}: test accuracy {result['accuracy']:.3f}, training loss per epoch "
          + ", ".join(f"{v:.3f}" for v in result["train_loss"]))


if __name__ == "__main__":
    main()
