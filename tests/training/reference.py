"""Every mode against one Keras process: the model, data and optimizers of the reference tests,
the Keras process itself, and each mode's side (a PS coordinator's job, or every rank's script:
``python tests/training/reference.py OUT_DIR MODE [FC_WORKERS] [--optimizers NAME,...]``).

A mode trains ``STEPS`` updates of the global batch on the first ``STEPS x batch`` rows, in
order (``shuffle=False``), from given initial weights; one Keras process ``fit``s the same
compiled model on the same rows with the same ``batch_size``. The model has a regularizer, so
the model's own losses are part of both.
"""

from __future__ import annotations

import json
import sys

import numpy as np

IMAGE, CLASSES, STEPS = 8, 5, 5
OPTIMIZERS = ("sgd", "momentum", "adam")  # every mode's; "clipped" on demand
LAYERS = ("images", "conv", "pool", "flatten", "fc1", "logits")


def net(seed: int = 0):
    import keras

    keras.utils.set_random_seed(seed)
    x = inputs = keras.Input((IMAGE, IMAGE, 3), name="images")
    x = keras.layers.Conv2D(6, 3, activation="relu", name="conv")(x)
    x = keras.layers.MaxPooling2D(2, name="pool")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(24, activation="relu", name="fc1",
                           kernel_regularizer=keras.regularizers.L2(1e-3))(x)
    return keras.Model(inputs, keras.layers.Dense(CLASSES, name="logits")(x), name="net")


def data(rows: int = 120):
    rng = np.random.default_rng(0)
    return (rng.normal(size=(rows, IMAGE, IMAGE, 3)).astype("float32"),
            rng.integers(0, CLASSES, rows).astype("int32"))


def compiled(name: str, seed: int = 0):
    import keras

    model = net(seed)
    optimizer = {"sgd": lambda: keras.optimizers.SGD(0.05),
                 "momentum": lambda: keras.optimizers.SGD(0.05, momentum=0.9),
                 "adam": lambda: keras.optimizers.Adam(0.01),
                 # clipnorm binds on every variable here: a sum of clipped parts differs
                 "clipped": lambda: keras.optimizers.SGD(0.05, clipnorm=0.01)}[name]()
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def keras_reference(initials: dict, batch: int) -> dict:
    """One Keras process: for each optimizer, ``fit`` from its initial weights."""
    out = {}
    x, y = data()
    for name, initial in initials.items():
        model = compiled(name)
        model.set_weights(initial)
        history = model.fit(x[:STEPS * batch], y[:STEPS * batch], batch_size=batch,
                            shuffle=False, epochs=1, verbose=0)
        out[name] = {"weights": model.get_weights(), "history": history.history}
    return out


def _train(trainer, batch: int) -> dict:
    x, y = data()
    history = trainer.fit(x[:STEPS * batch], y[:STEPS * batch], batch_size=batch, shuffle=False,
                          epochs=1, verbose=0)
    return {"weights": trainer.get_weights(), "history": history.history}


def ps_job(spec, mode: str, sync: str | None, batch: int, plan_json: str | None = None) -> dict:
    """A PS coordinator: each optimizer's initial weights, trained weights and logs."""
    import ralp

    plan = None if plan_json is None else ralp.Plan.from_json(plan_json)
    out = {}
    for name in OPTIMIZERS:
        model = compiled(name)
        initial = model.get_weights()
        trainer = ralp.wrap(model, spec, mode=mode, sync=sync, plan=plan, batch_size=batch)
        out[name] = {"initial": initial, **_train(trainer, batch),
                     "tasks": sorted(set(trainer.plan.offloaded.values()))}
    return out


def ranks_main(out_dir: str, mode: str, fc_workers: int = 1,
               optimizers: tuple[str, ...] = OPTIMIZERS) -> None:
    """Every rank of an allreduce job: each rank builds its model from another seed (the
    replicas agree only through the initial broadcast)."""
    import ralp

    out, rank = {}, None
    for name in optimizers:
        model = compiled(name, seed=100 + _launched_rank())
        trainer = ralp.wrap(model, mode=mode, **({"fc_workers": fc_workers}
                                                 if mode == "stanza" else {}))
        rank = trainer.runtime.rank
        batch = 6 * trainer.runtime.data_workers
        initial = trainer.get_weights()  # after the broadcast
        out[name] = {"initial": initial, **_train(trainer, batch), "batch": batch}
    if rank == 0:
        np.savez(f"{out_dir}/weights.npz", **{f"{name}/{kind}/{k}": w
                                               for name, result in out.items()
                                               for kind in ("initial", "weights")
                                               for k, w in enumerate(result[kind])})
        with open(f"{out_dir}/logs.json", "w") as f:
            json.dump({name: {"history": r["history"], "batch": r["batch"]}
                       for name, r in out.items()}, f)
    trainer.runtime.barrier()
    if mode == "collective":
        trainer.runtime.leave_together()
    elif rank == 0:  # the Horovod launcher's sign that the job finished
        from ralp._messages import emit

        emit("record", {"ranks": trainer.runtime.size})


def _launched_rank() -> int:
    """This process's rank as its launcher named it (horovodrun, or TF_CONFIG's task)."""
    import os

    if "HOROVOD_RANK" in os.environ:
        return int(os.environ["HOROVOD_RANK"])
    return int(json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index", 0))


def read_ranks(out_dir) -> dict:
    """What :func:`ranks_main` wrote, as :func:`ps_job` returns it."""
    with open(f"{out_dir}/logs.json") as f:
        logs = json.load(f)
    arrays = np.load(f"{out_dir}/weights.npz")
    out = {}
    for name, info in logs.items():
        out[name] = {"history": info["history"], "batch": info["batch"]}
        for kind in ("initial", "weights"):
            keys = sorted((k for k in arrays.files if k.startswith(f"{name}/{kind}/")),
                          key=lambda k: int(k.rsplit("/", 1)[1]))
            out[name][kind] = [arrays[k] for k in keys]
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = OPTIMIZERS
    if "--optimizers" in args:
        at = args.index("--optimizers")
        chosen = tuple(args[at + 1].split(","))
        del args[at:at + 2]
    ranks_main(args[0], args[1], *map(int, args[2:]), optimizers=chosen)
