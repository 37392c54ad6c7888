"""A user's training state through ralp against one Keras process (the model, data and net of
tests/training/reference.py): the optimizer's whole state both ways, and Keras' checkpoint
callbacks.

Scenarios (each the same for Keras and for a mode; ``make`` wraps a compiled model, or is
None for plain Keras):

- ``"resume"`` (Adam with a callback halving the rate every epoch; SGD with momentum on an
  ``ExponentialDecay`` schedule): fit 2 epochs, unwrap, save, load, wrap the loaded model,
  fit 1 epoch more, unwrap. The weights and every optimizer variable (step count, learning
  rate, moments) must equal Keras'.
- ``"checkpoints"``: fit with ``ModelCheckpoint`` (best whole model, and weights only by
  batches), ``EarlyStopping(restore_best_weights=True)`` stopping after epoch 1 and restoring
  epoch 0's weights; the checkpoints load compiled, with the optimizer's state.
- ``"backup"``: a fit with ``BackupAndRestore`` interrupted at the end of epoch 1; a fresh
  model (another seed) fits again with the same backup and goes on at epoch 2.

``python tests/training/state_reference.py OUT_DIR MODE [FC_WORKERS]`` runs every scenario in
every rank of an allreduce job; :func:`ps_job` in a parameter-server coordinator.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as every rank's script: the repository's tests importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.training import reference  # noqa: E402

STEPS = reference.STEPS
BATCH = 12  # the global batch of the allreduce jobs: 6 rows on each of two data ranks
SCENARIOS = ("resume:adam", "resume:schedule", "checkpoints", "backup", "user")


class Interrupt(Exception):
    """A crash at the end of epoch 1 (raised by :class:`InterruptAt`)."""


def _interrupt_at(epoch: int):
    import keras

    class InterruptAt(keras.callbacks.Callback):
        def on_epoch_end(self, e, logs=None):
            if e == epoch:
                raise Interrupt(f"interrupted after epoch {e}")

    return InterruptAt()


def two_inputs(seed: int):
    """A user's model of two inputs: an image and a vector of metadata."""
    import keras

    keras.utils.set_random_seed(seed)
    image = keras.Input((reference.IMAGE, reference.IMAGE, 3), name="image")
    meta = keras.Input((4,), name="meta")
    x = keras.layers.Conv2D(6, 3, activation="relu", name="conv")(image)
    x = keras.layers.MaxPooling2D(2, name="pool")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Concatenate(name="join")([x, keras.layers.Dense(5, name="meta_fc")(meta)])
    x = keras.layers.Dense(24, activation="relu", name="fc1")(x)
    return keras.Model([image, meta], keras.layers.Dense(reference.CLASSES, name="logits")(x))


def user_data(batch: int):
    """The user's tf.data pipeline: dict features, batches of the global batch."""
    import tensorflow as tf

    x, y = reference.data()
    meta = np.random.default_rng(1).normal(size=(len(x), 4)).astype("float32")
    rows = STEPS * batch
    return tf.data.Dataset.from_tensor_slices(
        ({"image": x[:rows], "meta": meta[:rows]}, y[:rows])).batch(batch)


def compiled(scenario: str, seed: int = 0):
    import keras

    model = two_inputs(seed) if scenario == "user" else reference.net(seed)
    if scenario == "resume:schedule":
        rate = keras.optimizers.schedules.ExponentialDecay(0.05, decay_steps=3, decay_rate=0.5)
        optimizer = keras.optimizers.SGD(rate, momentum=0.9)
    else:
        optimizer = keras.optimizers.Adam(0.01)
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def state(model) -> dict:
    """A Keras model's weights and its optimizer's variables (with their names)."""
    opt = model.optimizer
    return {"weights": [np.asarray(w) for w in model.get_weights()],
            "optimizer": [np.asarray(v) for v in opt.variables],
            "names": [v.path.split("/", 1)[-1] for v in opt.variables],
            "learning_rate": float(np.asarray(opt.learning_rate))}


def _fit(target, batch: int, epochs: int, callbacks, initial_epoch: int = 0):
    x, y = reference.data()
    return target.fit(x[:STEPS * batch], y[:STEPS * batch], batch_size=batch, shuffle=False,
                      epochs=epochs, verbose=0, callbacks=callbacks, initial_epoch=initial_epoch)


def run(scenario: str, make, batch: int, out: str, initial: list | None = None,
        seed: int = 0, chief: bool = True) -> dict:
    """One scenario; ``make(model)`` wraps a model (None: Keras itself). ``out``: a directory
    of this process's own. ``initial``: the weights to start from (default: the model's after
    wrapping). ``chief``: this process writes the checkpoints (in a job of ranks, rank 0).
    Returns the initial weights and what the scenario checks."""
    import keras

    def wrap(model):
        return model if make is None else make(model)

    if scenario == "user":  # every process starts alike: its first epoch is Keras' own
        return _user(wrap, make is None, batch, out, initial, chief)
    model = compiled(scenario, seed)
    if initial is not None:
        model.set_weights(initial)
    trainer = wrap(model)
    initial = [np.asarray(w) for w in trainer.get_weights()]
    if scenario.startswith("resume"):
        halve = ([keras.callbacks.LearningRateScheduler(lambda e, rate: rate * 0.5)]
                 if scenario == "resume:adam" else [])
        _fit(trainer, batch, 2, halve)
        first = trainer if make is None else trainer.unwrap()
        first.save(f"{out}/first.keras")
        again = wrap(keras.models.load_model(f"{out}/first.keras"))
        _fit(again, batch, 1, halve)
        return {"initial": initial, "final": state(again if make is None else again.unwrap())}
    if scenario == "checkpoints":
        callbacks = [
            keras.callbacks.ModelCheckpoint(f"{out}/best.keras", monitor="loss", mode="max",
                                            save_best_only=True),
            keras.callbacks.ModelCheckpoint(f"{out}/by_batch.weights.h5",
                                            save_weights_only=True, save_freq=3),
            keras.callbacks.EarlyStopping(monitor="loss", mode="max", patience=1,
                                          restore_best_weights=True)]
        history = _fit(trainer, batch, 4, callbacks)
        final = state(trainer if make is None else trainer.unwrap())
        if not chief:
            return {"initial": initial, "epochs": len(history.history["loss"]), "final": final}
        best = keras.models.load_model(f"{out}/best.keras")
        by_batch = compiled(scenario, seed=7)
        by_batch.optimizer.build(by_batch.trainable_variables)
        by_batch.load_weights(f"{out}/by_batch.weights.h5")
        x, y = reference.data()
        return {"initial": initial, "epochs": len(history.history["loss"]), "final": final,
                "best": state(best), "best_evaluated": best.evaluate(x, y, verbose=0)[0],
                "by_batch": state(by_batch)}
    backup = keras.callbacks.BackupAndRestore(f"{out}/backup", delete_checkpoint=False)
    try:
        _fit(trainer, batch, 4, [backup, _interrupt_at(1)])
    except Exception as e:  # noqa: BLE001 - the interruption, however a mode wraps it
        if "interrupted after epoch 1" not in str(e):
            raise
    fresh = compiled(scenario, seed=seed + 50)
    again = wrap(fresh)
    history = _fit(again, batch, 4, [keras.callbacks.BackupAndRestore(f"{out}/backup")])
    return {"initial": initial, "epochs": len(history.history["loss"]),
            "final": state(again if make is None else again.unwrap())}


def _user(wrap, plain: bool, batch: int, out: str, initial, chief: bool) -> dict:
    """A Keras user's script: a compiled model of two inputs trained one epoch by Keras
    (saved and loaded: its optimizer mid-training), then fed a tf.data pipeline of dict
    features, with ModelCheckpoint, ReduceLROnPlateau and
    EarlyStopping(restore_best_weights=True)."""
    import keras

    model = compiled("user")
    if initial is not None:
        model.set_weights(initial)
    initial = [np.asarray(w) for w in model.get_weights()]
    model.fit(user_data(batch), epochs=1, verbose=0)  # before it came to ralp
    model.save(f"{out}/mid.keras")
    again = wrap(keras.models.load_model(f"{out}/mid.keras"))
    callbacks = [
        keras.callbacks.ModelCheckpoint(f"{out}/best.keras", monitor="loss", mode="max",
                                        save_best_only=True),
        keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0,
                                          min_delta=10.0),  # never better by 10: every epoch
        keras.callbacks.EarlyStopping(monitor="loss", mode="max", patience=2,
                                      restore_best_weights=True)]
    history = again.fit(user_data(batch), epochs=6, verbose=0, callbacks=callbacks)
    found = {"initial": initial, "epochs": len(history.history["loss"]),
             "rates": [float(r) for r in history.history["learning_rate"]],
             "final": state(again if plain else again.unwrap())}
    if chief:
        found["best"] = state(keras.models.load_model(f"{out}/best.keras"))
    return found


def keras_reference(initials: dict, batch: int, out: str) -> dict:
    """One Keras process: each scenario from the mode's initial weights."""
    result = {}
    for scenario, initial in initials.items():
        directory = f"{out}/keras-{scenario.replace(':', '-')}"
        os.makedirs(directory, exist_ok=True)
        result[scenario] = run(scenario, None, batch, directory, initial=initial)
    return result


def ps_job(spec, mode: str, batch: int, out: str) -> dict:
    """A parameter-server coordinator: every scenario in ``mode`` under BSP."""
    import ralp

    def make(model):
        return ralp.wrap(model, spec, mode=mode, sync="bsp", batch_size=batch)

    result = {}
    for scenario in SCENARIOS:
        directory = f"{out}/{mode}-{scenario.replace(':', '-')}"
        os.makedirs(directory, exist_ok=True)
        result[scenario] = run(scenario, make, batch, directory)
    return result


def ranks_main(out: str, mode: str, fc_workers: int = 1) -> None:
    """Every rank of an allreduce job: each scenario in ``mode``; rank 0 writes the results.
    Every rank builds from its own seed (the ranks agree through the initial broadcast)."""
    import ralp

    rank = reference._launched_rank()
    extra = {"fc_workers": fc_workers} if mode == "stanza" else {}
    trainers = []

    def make(model):
        trainers.append(ralp.wrap(model, mode=mode, **extra))
        return trainers[-1]

    result = {}
    for scenario in SCENARIOS:
        directory = f"{out}/{mode}-{scenario.replace(':', '-')}-rank{rank}"
        os.makedirs(directory, exist_ok=True)
        result[scenario] = run(scenario, make, BATCH, directory, seed=100 + rank,
                               chief=rank == 0)
    runtime = trainers[-1].runtime
    if rank == 0:
        with open(f"{out}/state.pickle", "wb") as f:
            pickle.dump({"result": result, "batch": BATCH}, f)
    runtime.barrier()
    if mode == "collective":
        runtime.leave_together()
    elif rank == 0:
        from ralp._messages import emit

        emit("record", {"ranks": runtime.size})


def read_ranks(out: str) -> tuple[dict, int]:
    with open(f"{out}/state.pickle", "rb") as f:
        found = pickle.load(f)
    return found["result"], found["batch"]


if __name__ == "__main__":
    ranks_main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))
