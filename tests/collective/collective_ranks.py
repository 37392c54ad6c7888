"""Run by the tests as every worker of a collective job (``TF_CONFIG`` set by the launcher):

    python tests/collective/collective_ranks.py OUT_DIR STEPS BATCH OPTIMIZER

Worker k trains a small CNN on batch k of each step of a fixed global batch sequence
(``global_batches``) and writes its initial and final weights and losses to
OUT_DIR/worker<k>.npz. OPTIMIZER "default" leaves the trainer's default; "adam" compiles the
model with Adam (the compiled optimizer is used).
"""

from __future__ import annotations

import sys

import numpy as np

IMAGE, CLASSES = 8, 5


def global_batches(steps: int, workers: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of shape (steps, workers, batch, ...): worker k's batch of step s is [s, k]."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(steps, workers, batch, IMAGE, IMAGE, 1)).astype("float32")
    y = rng.integers(0, CLASSES, size=(steps, workers, batch)).astype("int32")
    return x, y


def build(optimizer: str):
    import keras

    keras.utils.set_random_seed(11)  # the same on every worker; worker 0's values win anyway
    model = keras.Sequential([
        keras.Input((IMAGE, IMAGE, 1)),
        keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="relu", name="fc1"),
        keras.layers.Dense(CLASSES, name="logits"),
    ])
    if optimizer == "adam":
        model.compile(optimizer=keras.optimizers.Adam(1e-2),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def main() -> None:
    out_dir, steps, batch, optimizer = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    from ralp.collective.trainer import CollectiveTrainer

    trainer = CollectiveTrainer(lambda: build(optimizer))
    initial = trainer.weights()
    x, y = global_batches(steps, trainer.workers, batch)
    k = trainer.rank
    history = trainer.run_steps(((x[s, k], y[s, k]) for s in range(steps)), steps)
    trainer.barrier()
    np.savez(f"{out_dir}/worker{k}.npz", *initial, *trainer.weights(),
             losses=np.array(history.step_losses), workers=trainer.workers)


if __name__ == "__main__":
    main()
