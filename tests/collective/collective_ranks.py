"""Run by the tests as every worker of a collective job (``TF_CONFIG`` set by the launcher):

    python tests/collective/collective_ranks.py OUT_DIR SCENARIO

SCENARIO "fit": Keras' fit with validation and a callback, the history to OUT_DIR/fit<k>.json;
"die": worker 1 exits with 3 after its second step; "two_outputs": the model has two outputs;
"stall": worker 1 stops for 30 s before its third step, past the 10 s step timeout.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

IMAGE, CLASSES, BATCH = 8, 5, 6


def data(rows: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    return (rng.normal(size=(rows, IMAGE, IMAGE, 1)).astype("float32"),
            rng.integers(0, CLASSES, size=rows).astype("int32"))


def build(two_outputs: bool = False):
    import keras

    keras.utils.set_random_seed(11)  # the same on every worker; worker 0's values win anyway
    if two_outputs:
        inputs = keras.Input((IMAGE, IMAGE, 1))
        flat = keras.layers.Flatten()(inputs)
        return keras.Model(inputs, [keras.layers.Dense(CLASSES)(flat),
                                    keras.layers.Dense(CLASSES)(flat)])
    return keras.Sequential([
        keras.Input((IMAGE, IMAGE, 1)),
        keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="relu", name="fc1"),
        keras.layers.Dense(CLASSES, name="logits"),
    ])


def main() -> None:
    out_dir, scenario = sys.argv[1], sys.argv[2]
    import keras

    import ralp

    failures = ralp.Failures(step_timeout=10) if scenario == "stall" else None
    trainer = ralp.wrap(lambda: build(scenario == "two_outputs"), mode="collective",
                        failures=failures)
    runtime = trainer.runtime
    k, workers = runtime.rank, runtime.size
    seen = []
    callbacks = [keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(e))]
    if scenario == "die":
        callbacks = [keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda b, logs: os._exit(3) if k == 1 and b == 1 else None)]
    if scenario == "stall":
        callbacks = [keras.callbacks.LambdaCallback(
            on_train_batch_begin=lambda b, logs: time.sleep(30) if k == 1 and b == 2 else None)]
    x, y = data(16 * BATCH * workers)
    history = trainer.fit(x, y, batch_size=BATCH * workers, epochs=3, validation_split=0.25,
                          callbacks=callbacks, verbose=0)
    with open(f"{out_dir}/fit{k}.json", "w") as f:
        json.dump({"history": history.history, "epochs_seen": seen,
                   "steps": len(history.step_losses)}, f)


if __name__ == "__main__":
    main()
