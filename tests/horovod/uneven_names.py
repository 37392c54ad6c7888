"""Every rank of a Horovod job (``python tests/horovod/uneven_names.py OUT_DIR MODE``) builds
the same model after rank 0 alone made other Keras objects first, as a user's script does
that evaluates a checkpoint on rank 0 only: Keras then numbers the ranks' layers and
optimizers differently (``dense_3`` against ``dense``). Every rank wraps, fits, evaluates and
unwraps; rank 0 writes what it trained."""

import json
import sys

import numpy as np


def main(out: str, mode: str) -> None:
    import keras

    import ralp

    rank = int(__import__("os").environ["HOROVOD_RANK"])
    if rank == 0:  # objects only rank 0 makes: its names move on
        for _ in range(3):
            extra = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
            extra.compile(optimizer="adam", loss="mse")
            extra.optimizer.build(extra.trainable_variables)
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6, 6, 1))
    x = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(8, activation="relu")(x)
    model = keras.Model(inputs, keras.layers.Dense(3)(x))
    model.compile(optimizer="adam", metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    trainer = ralp.wrap(model, mode=mode)
    rng = np.random.default_rng(0)
    x, y = rng.random((24, 6, 6, 1), dtype=np.float32), rng.integers(0, 3, 24)
    history = trainer.fit(x, y, batch_size=8, epochs=2, verbose=0)
    evaluated = trainer.evaluate(x, y, verbose=0)
    iterations = int(trainer.unwrap().optimizer.iterations)
    trainer.runtime.barrier()
    if rank == 0:
        with open(f"{out}/done.json", "w") as f:
            json.dump({"loss": history.history["loss"], "evaluated": evaluated,
                       "iterations": iterations}, f)
        from ralp._messages import emit

        emit("record", {"ranks": trainer.runtime.size})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
