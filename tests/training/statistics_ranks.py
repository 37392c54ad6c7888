"""Every rank of an allreduce job trains a model with batch normalization and writes what it
holds after ``fit``: ``python tests/training/statistics_ranks.py OUT_DIR MODE [FC_WORKERS]``.

The first layer normalizes the images themselves, so its moving statistics depend on the data
alone: :func:`expected_input_statistics` computes in numpy what they must be, the mean over
the data ranks of each rank's moving average of its own rows' batch moments (what TensorFlow's
MirroredStrategy reads from its replicas). A second batch normalization, after the dense layer
(in Stanza's tail), is checked for equality between the ranks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as every rank's script: the repository's tests importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.training.reference import _launched_rank  # noqa: E402

IMAGE, CLASSES, ROWS, BATCH, EPOCHS, MOMENTUM = 6, 3, 48, 12, 2, 0.5


def data():
    rng = np.random.default_rng(3)
    x = rng.normal(loc=2.0, scale=3.0, size=(ROWS, IMAGE, IMAGE, 2)).astype("float32")
    return x, rng.integers(0, CLASSES, ROWS).astype("int32")


def build(seed: int):
    import keras

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((IMAGE, IMAGE, 2))
    x = keras.layers.BatchNormalization(momentum=MOMENTUM, name="bn_images")(inputs)
    x = keras.layers.Conv2D(4, 3, activation="relu")(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(16, name="fc")(x)
    x = keras.layers.BatchNormalization(momentum=MOMENTUM, name="bn_fc")(x)
    model = keras.Model(inputs, keras.layers.Dense(CLASSES, name="logits")(x))
    model.compile(optimizer=keras.optimizers.SGD(0.05), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def expected_input_statistics(data_ranks: int) -> tuple[np.ndarray, np.ndarray]:
    """The first layer's moving mean and variance after the fit, by numpy."""
    x, _ = data()
    per_rank_mean = np.zeros((data_ranks, 2))
    per_rank_var = np.ones((data_ranks, 2))
    for _ in range(EPOCHS):
        for start in range(0, ROWS, BATCH):
            batch = x[start:start + BATCH].astype(np.float64)
            for r in range(data_ranks):  # ralp.training.data.split_bounds
                rows = batch[r * BATCH // data_ranks:(r + 1) * BATCH // data_ranks]
                mean, var = rows.mean(axis=(0, 1, 2)), rows.var(axis=(0, 1, 2))
                per_rank_mean[r] = per_rank_mean[r] * MOMENTUM + mean * (1 - MOMENTUM)
                per_rank_var[r] = per_rank_var[r] * MOMENTUM + var * (1 - MOMENTUM)
    return per_rank_mean.mean(axis=0), per_rank_var.mean(axis=0)


def _statistics(model) -> dict:
    return {f"{layer}/{name}": np.asarray(getattr(model.get_layer(layer), name))
            for layer in ("bn_images", "bn_fc") for name in ("moving_mean", "moving_variance")}


def main(out: str, mode: str, fc_workers: int = 1) -> None:
    import ralp

    rank = _launched_rank()
    trainer = ralp.wrap(build(seed=10 + rank), mode=mode,
                        **({"fc_workers": fc_workers} if mode == "stanza" else {}))
    x, y = data()
    trainer.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0)
    replica = _statistics(trainer.model)  # this rank's training replica (Stanza: its part)
    evaluated = trainer.evaluate(x, y, verbose=0)
    unwrapped = _statistics(trainer.unwrap())
    np.savez(f"{out}/rank{rank}.npz", evaluated=np.asarray(evaluated),
             **{f"replica/{k}": v for k, v in replica.items()},
             **{f"unwrapped/{k}": v for k, v in unwrapped.items()})
    runtime = trainer.runtime
    runtime.barrier()
    if mode == "collective":
        runtime.leave_together()
    elif rank == 0:
        from ralp._messages import emit

        emit("record", {"ranks": runtime.size})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))
