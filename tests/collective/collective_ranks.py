"""Run by the tests as every worker of a collective job (``TF_CONFIG`` set by the launcher):

    python tests/collective/collective_ranks.py OUT_DIR STEPS BATCH OPTIMIZER [SCENARIO]

Worker k trains a small CNN on batch k of each step of a fixed global batch sequence
(``global_batches``) and writes its initial and final weights and losses to
OUT_DIR/worker<k>.npz. OPTIMIZER "default" leaves the trainer's default; "adam" compiles the
model with Adam (the compiled optimizer is used). SCENARIO "die": worker 1 exits with 3 after
its second step; "fit": Keras-like fit with validation and a callback, the history to
OUT_DIR/fit<k>.json; "two_outputs": the model has two outputs.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

IMAGE, CLASSES = 8, 5


def global_batches(steps: int, workers: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of shape (steps, workers, batch, ...): worker k's batch of step s is [s, k]."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(steps, workers, batch, IMAGE, IMAGE, 1)).astype("float32")
    y = rng.integers(0, CLASSES, size=(steps, workers, batch)).astype("int32")
    return x, y


def build(optimizer: str, two_outputs: bool = False):
    import keras

    keras.utils.set_random_seed(11)  # the same on every worker; worker 0's values win anyway
    model = keras.Sequential([
        keras.Input((IMAGE, IMAGE, 1)),
        keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="relu", name="fc1"),
        keras.layers.Dense(CLASSES, name="logits"),
    ])
    if two_outputs:
        inputs = keras.Input((IMAGE, IMAGE, 1))
        flat = keras.layers.Flatten()(inputs)
        return keras.Model(inputs, [keras.layers.Dense(CLASSES)(flat),
                                    keras.layers.Dense(CLASSES)(flat)])
    if optimizer == "adam":
        model.compile(optimizer=keras.optimizers.Adam(1e-2),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def main() -> None:
    out_dir, steps, batch, optimizer = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    scenario = sys.argv[5] if len(sys.argv) > 5 else "steps"
    from ralp.collective.runtime import CollectiveTrainer

    trainer = CollectiveTrainer(lambda: build(optimizer, scenario == "two_outputs"))
    k = trainer.rank
    if scenario == "fit":
        return _fit(trainer, out_dir, batch)
    initial = trainer.weights()
    x, y = global_batches(steps, trainer.workers, batch)

    def on_step(step: int, loss: float) -> None:
        if scenario == "die" and k == 1 and step == 1:
            os._exit(3)

    history = trainer.run_steps(((x[s, k], y[s, k]) for s in range(steps)), steps, on_step)
    trainer.leave_together()
    np.savez(f"{out_dir}/worker{k}.npz", *initial, *trainer.weights(),
             losses=np.array(history.step_losses), workers=trainer.workers)


def _fit(trainer, out_dir: str, batch: int) -> None:
    import keras

    x, y = global_batches(4, 2 * trainer.workers, batch)
    x, y = x.reshape(-1, IMAGE, IMAGE, 1), y.reshape(-1)
    seen = []
    logger = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(e))
    history = trainer.fit(x, y, batch_size=batch, epochs=3, validation_split=0.25,
                          callbacks=[logger])
    with open(f"{out_dir}/fit{trainer.rank}.json", "w") as f:
        json.dump({"history": history.history, "epochs_seen": seen,
                   "steps": len(history.step_losses)}, f)
    trainer.leave_together()


if __name__ == "__main__":
    main()
