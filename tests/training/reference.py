"""Every mode against one Keras process: the model, data and optimizers of the reference tests,
the Keras process itself, and each mode's side (a PS coordinator's job, or every rank's script:
``python tests/training/reference.py OUT_DIR MODE [FC_WORKERS [FEATURES]] [--optimizers NAME,...]``).

A mode trains ``STEPS`` updates of the global batch on the first ``STEPS x batch`` rows, in
order (``shuffle=False``), from given initial weights; one Keras process ``fit``s the same
compiled model on the same rows with the same ``batch_size``. The model has a regularizer, so
the model's own losses are part of both.

``FEATURES`` "two": a model of two inputs (images, and a vector whose branch the split puts
on the PS, so the raw input crosses), fed as Keras users feed one: with SGD with momentum, a
dict of arrays and ``validation_split``; with Adam, a dataset of tuple features and
``validation_data`` a dict. The Keras process fits a list of arrays. Both sides then
``evaluate`` a dataset of dict features and ``predict`` a dict of arrays. "ids": the same
with integer ids for the second input, embedded on the PS (SGD with momentum only).
"""

from __future__ import annotations

import json
import sys

import numpy as np

IMAGE, CLASSES, STEPS, META = 8, 5, 5, 4
OPTIMIZERS = ("sgd", "momentum", "adam")  # every mode's; "clipped" on demand
TWO_INPUT_OPTIMIZERS = ("momentum", "adam")  # dict arrays; a dataset of tuple features
LAYERS = ("images", "conv", "pool", "flatten", "fc1", "logits")
HELD = 20  # validation rows of the two-input runs


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


def two_input_net(seed: int = 0, ids: bool = False):
    """Images and a vector of ``META`` values (or of ``META`` integer ids, embedded), joined
    before the FC layers."""
    import keras

    keras.utils.set_random_seed(seed)
    images = keras.Input((IMAGE, IMAGE, 3), name="images")
    meta = keras.Input((META,), name="meta", dtype="int32" if ids else "float32")
    model_inputs = [images, meta]
    x = keras.layers.Conv2D(6, 3, activation="relu", name="conv")(images)
    x = keras.layers.MaxPooling2D(2, name="pool")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    if ids:
        meta = keras.layers.Flatten(name="ids")(keras.layers.Embedding(10, 2, name="embed")(meta))
    m = keras.layers.Dense(8, activation="relu", name="meta_fc")(meta)
    x = keras.layers.Concatenate(name="join")([x, m])
    x = keras.layers.Dense(24, activation="relu", name="fc1",
                           kernel_regularizer=keras.regularizers.L2(1e-3))(x)
    return keras.Model(model_inputs, keras.layers.Dense(CLASSES, name="logits")(x),
                       name="net2")


def data(rows: int = 120):
    rng = np.random.default_rng(0)
    return (rng.normal(size=(rows, IMAGE, IMAGE, 3)).astype("float32"),
            rng.integers(0, CLASSES, rows).astype("int32"))


def meta(rows: int = 120, features: str = "two"):
    rng = np.random.default_rng(1)
    if features == "ids":
        return rng.integers(0, 10, (rows, META)).astype("int32")
    return rng.normal(size=(rows, META)).astype("float32")


def compiled(name: str, seed: int = 0, features: str = "one"):
    import keras

    model = net(seed) if features == "one" else two_input_net(seed, features == "ids")
    optimizer = {"sgd": lambda: keras.optimizers.SGD(0.05),
                 "momentum": lambda: keras.optimizers.SGD(0.05, momentum=0.9),
                 "adam": lambda: keras.optimizers.Adam(0.01),
                 # clipnorm binds on every variable here: a sum of clipped parts differs
                 "clipped": lambda: keras.optimizers.SGD(0.05, clipnorm=0.01)}[name]()
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def keras_reference(initials: dict, batch: int, features: str = "one") -> dict:
    """One Keras process: for each optimizer, ``fit`` from its initial weights."""
    out = {}
    x, y = data()
    rows = STEPS * batch
    for name, initial in initials.items():
        model = compiled(name, features=features)
        model.set_weights(initial)
        if features == "one":
            history = model.fit(x[:rows], y[:rows], batch_size=batch, shuffle=False, epochs=1,
                                verbose=0)
            out[name] = {"weights": model.get_weights(), "history": history.history}
            continue
        m = meta(features=features)
        if name == "momentum":
            history = model.fit([x[:rows + HELD], m[:rows + HELD]], y[:rows + HELD],
                                batch_size=batch, shuffle=False, verbose=0,
                                validation_split=HELD / (rows + HELD))
        else:
            history = model.fit([x[:rows], m[:rows]], y[:rows], batch_size=batch,
                                shuffle=False, verbose=0,
                                validation_data=([x[-HELD:], m[-HELD:]], y[-HELD:]))
        out[name] = {"weights": model.get_weights(), "history": history.history,
                     **_evaluated(model, features)}
    return out


def _evaluated(model, features: str) -> dict:
    """``evaluate`` on a dataset of dict features and ``predict`` on a dict of arrays (a Keras
    model, or a trainer)."""
    import tensorflow as tf

    x, y = data()
    m = meta(features=features)
    dataset = tf.data.Dataset.from_tensor_slices(({"images": x[-HELD:], "meta": m[-HELD:]},
                                                  y[-HELD:])).batch(8)
    return {"evaluate": model.evaluate(dataset, return_dict=True, verbose=0),
            "predict": model.predict({"images": x[-HELD:], "meta": m[-HELD:]}, verbose=0)}


def _train(trainer, batch: int, name: str = "sgd", features: str = "one") -> dict:
    x, y = data()
    rows = STEPS * batch
    if features == "one":
        history = trainer.fit(x[:rows], y[:rows], batch_size=batch, shuffle=False, epochs=1,
                              verbose=0)
        return {"weights": trainer.get_weights(), "history": history.history}
    import tensorflow as tf

    m = meta(features=features)
    if name == "momentum":  # a dict of arrays, validation_split
        history = trainer.fit({"meta": m[:rows + HELD], "images": x[:rows + HELD]},
                              y[:rows + HELD], batch_size=batch, shuffle=False, verbose=0,
                              validation_split=HELD / (rows + HELD))
    else:  # a dataset of tuple features, validation_data a dict
        dataset = tf.data.Dataset.from_tensor_slices(((x[:rows], m[:rows]), y[:rows]))
        history = trainer.fit(dataset.batch(batch), verbose=0,
                              validation_data=({"images": x[-HELD:], "meta": m[-HELD:]},
                                               y[-HELD:]))
    return {"weights": trainer.get_weights(), "history": history.history,
            **_evaluated(trainer, features)}


def _optimizers(features: str) -> tuple:
    return {"one": OPTIMIZERS, "two": TWO_INPUT_OPTIMIZERS, "ids": ("momentum",)}[features]


def ps_job(spec, mode: str, sync: str | None, batch: int, plan_json: str | None = None,
           features: str = "one") -> dict:
    """A PS coordinator: each optimizer's initial weights, trained weights and logs."""
    import ralp

    plan = None if plan_json is None else ralp.Plan.from_json(plan_json)
    out = {}
    for name in _optimizers(features):
        model = compiled(name, features=features)
        initial = model.get_weights()
        trainer = ralp.wrap(model, spec, mode=mode, sync=sync, plan=plan, batch_size=batch)
        out[name] = {"initial": initial, **_train(trainer, batch, name, features),
                     "tasks": sorted(set(trainer.plan.offloaded.values())),
                     "offloaded": list(trainer.plan.offloaded)}
    return out


def ranks_main(out_dir: str, mode: str, fc_workers: int = 1, features: str = "one",
               optimizers: tuple[str, ...] | None = None) -> None:
    """Every rank of an allreduce job: each rank builds its model from another seed (the
    replicas agree only through the initial broadcast)."""
    import ralp

    out, rank = {}, None
    for name in optimizers or _optimizers(features):
        model = compiled(name, seed=100 + _launched_rank(), features=features)
        trainer = ralp.wrap(model, mode=mode, **({"fc_workers": fc_workers}
                                                 if mode == "stanza" else {}))
        rank = trainer.runtime.rank
        batch = 6 * trainer.runtime.data_workers
        initial = trainer.get_weights()  # after the broadcast
        out[name] = {"initial": initial, **_train(trainer, batch, name, features),
                     "batch": batch}
    if rank == 0:
        np.savez(f"{out_dir}/weights.npz", **{f"{name}/{kind}/{k}": w
                                               for name, result in out.items()
                                               for kind in ("initial", "weights")
                                               for k, w in enumerate(result[kind])},
                 **{f"{name}/predict": r["predict"] for name, r in out.items()
                    if "predict" in r})
        with open(f"{out_dir}/logs.json", "w") as f:
            json.dump({name: {"history": r["history"], "batch": r["batch"],
                              "evaluate": r.get("evaluate")}
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
        if info.get("evaluate") is not None:
            out[name].update(evaluate=info["evaluate"], predict=arrays[f"{name}/predict"])
        for kind in ("initial", "weights"):
            keys = sorted((k for k in arrays.files if k.startswith(f"{name}/{kind}/")),
                          key=lambda k: int(k.rsplit("/", 1)[1]))
            out[name][kind] = [arrays[k] for k in keys]
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = None
    if "--optimizers" in args:
        at = args.index("--optimizers")
        chosen = tuple(args[at + 1].split(","))
        del args[at:at + 2]
    ranks_main(args[0], args[1], *map(int, args[2:3]), *args[3:4], optimizers=chosen)
