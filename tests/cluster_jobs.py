"""Coordinator-side jobs for the cluster tests, each run in a fresh process.

ParameterServerStrategy ties a process to one cluster for good, so every scenario runs its
coordinator through ``run_in_fresh_process``; these functions must be importable for that.
"""

from __future__ import annotations

import numpy as np

IMAGE, CLASSES, BATCH = 8, 10, 8


def small_cnn(seed: int = 0, dropout: float = 0.2, channels: int = 3):
    import keras

    keras.utils.set_random_seed(seed)
    x = inp = keras.Input((IMAGE, IMAGE, channels), name="images")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv1")(x)
    x = keras.layers.MaxPooling2D(2, name="pool1")(x)
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv2")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(128, activation="relu", name="fc1")(x)
    if dropout:
        x = keras.layers.Dropout(dropout, name="drop1")(x)
    x = keras.layers.Dense(CLASSES, name="logits")(x)
    return keras.Model(inp, x, name="small_cnn")


def fixed_data(n: int = 160, seed: int = 0):
    """Random images labelled by a fixed random linear map: learnable, so losses fall."""
    rng = np.random.RandomState(seed)
    x = rng.rand(n, IMAGE, IMAGE, 3).astype("float32")
    projection = rng.randn(IMAGE * IMAGE * 3, CLASSES)
    y = np.argmax((x.reshape(n, -1) - 0.5) @ projection, axis=1).astype("int32")
    return x, y


def make_optimizer(name: str):
    import keras

    return {"sgd": keras.optimizers.SGD(0.05, momentum=0.9), "adam": keras.optimizers.Adam(1e-3)}[
        name
    ]


def cluster_losses(spec, mode: str, optimizer: str, steps: int, seed: int = 0,
                   pull_schedule: str = "default") -> list[float]:
    """Per-step losses of ``steps`` batches through the PS trainer (1 worker, no shuffling)."""
    import ralp

    trainer = ralp.wrap(small_cnn(seed), spec, mode=mode, optimizer=make_optimizer(optimizer),
                        batch_size=BATCH, threshold=10.0, pulls=pull_schedule)
    assert trainer.mode == mode, trainer.plan
    assert trainer.plan.pull_schedule == pull_schedule
    assert bool(trainer.plan.pull_batches) == (pull_schedule != "default"), trainer.plan
    x, y = fixed_data()
    history = trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=steps, shuffle=False, verbose=0)
    return history.step_losses


def local_losses(optimizer: str, steps: int, seed: int = 0) -> list[float]:
    """The reference: the same model and data in one process, a plain Keras training loop."""
    import keras

    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return keras_loop_losses(small_cnn(seed), make_optimizer(optimizer), loss_fn, fixed_data(),
                             steps)


def keras_loop_losses(model, opt, loss_fn, data, steps: int) -> list[float]:
    """A plain single-process Keras training loop over ``data``'s batches (repeated)."""
    import tensorflow as tf

    x, y = data
    batches = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH, drop_remainder=True)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return [float(step(xb, yb)) for xb, yb in batches.take(steps)]


def digits_accuracy(spec, mode: str, epochs: int, seed: int = 0) -> dict:
    """Train on sklearn's digits (real 8x8 images) with 2 workers; test accuracy."""
    import keras
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    import ralp

    digits = load_digits()
    x = (digits.images / 16.0).astype("float32")[..., None]
    y = digits.target.astype("int32")
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=seed, stratify=y
    )
    trainer = ralp.wrap(small_cnn(seed, dropout=0.0, channels=1), spec, mode=mode,
                        optimizer=keras.optimizers.Adam(1e-3), batch_size=32,
                        threshold=10.0)
    history = trainer.fit(x_train, y_train, batch_size=32, epochs=epochs, seed=seed, verbose=0)
    result = trainer.evaluate(x_test, y_test, return_dict=True, verbose=0)
    result["train_loss"] = history.history["loss"]
    result["mode"] = trainer.mode
    return result


def checkpoint_round_trip(spec, directory: str) -> dict:
    """Save, train on, restore: every variable (PS shards, offloaded, optimizer) comes back."""
    import ralp

    trainer = ralp.wrap(small_cnn(), spec, mode="ralp", optimizer=make_optimizer("adam"),
                        batch_size=BATCH, threshold=10.0)
    x, y = fixed_data()
    trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=5, verbose=0)

    def state():
        variables = list(trainer.model.variables)
        for opt in trainer.runtime.optimizers.values():
            variables += list(opt.variables)
        return [v.numpy().copy() for v in variables], [v.path for v in variables]

    saved, paths = state()
    prefix = trainer.save_checkpoint(f"{directory}/ckpt")
    trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=5, verbose=0)
    changed = [
        p for p, a, b in zip(paths, saved, state()[0], strict=True) if not np.array_equal(a, b)
    ]
    trainer.restore_checkpoint(prefix)
    restored = state()[0]
    mismatched = [
        p for p, a, b in zip(paths, saved, restored, strict=True) if not np.array_equal(a, b)
    ]
    devices = {v.path: v.value.device for v in trainer.model.variables}
    return {"changed": changed, "mismatched": mismatched, "count": len(paths), "devices": devices}


def placement(spec, plan_json: str | None = None, mode: str = "ralp") -> dict:
    """Where every variable and optimizer slot of a placed model lives."""
    import ralp
    from ralp.placement.plan import Plan

    plan = None if plan_json is None else Plan.from_json(plan_json)
    trainer = ralp.wrap(small_cnn(), spec, mode=mode, plan=plan, optimizer=make_optimizer("adam"),
                        batch_size=BATCH, threshold=10.0)
    x, y = fixed_data()
    trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=2, verbose=0)
    layer_vars = {
        v.path: (layer.name, v.value.device)
        for layer in trainer.model.layers
        for v in layer.variables
    }
    slots = {v.path: v.value.device for opt in trainer.runtime.optimizers.values() for v in opt.variables}
    from ralp._compat import slot_variables

    slots_by_layer = {
        layer.name: [slot.value.device for opt in trainer.runtime.optimizers.values()
                     for v in layer.trainable_variables for slot in slot_variables(opt, v)]
        for layer in trainer.model.layers if layer.trainable_variables
    }
    plain = trainer.unwrap()
    same = all(
        np.array_equal(a, b)
        for a, b in zip(plain.get_weights(), trainer.get_weights(), strict=True)
    )
    return {"plan": trainer.plan.to_dict(), "layer_vars": layer_vars, "slots": slots,
            "slots_by_layer": slots_by_layer,
            "unwrap_keeps_weights": same,
            "unwrapped_type": type(plain).__name__}


def nothing_to_offload(spec) -> dict:
    import warnings

    import keras

    import ralp

    x = inp = keras.Input((IMAGE, IMAGE, 3))
    x = keras.layers.Conv2D(8, 3, name="c1")(x)
    x = keras.layers.Conv2D(CLASSES, 3, name="c2")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    model = keras.Model(inp, x, name="all_conv")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = ralp.wrap(model, spec, mode="skewness", batch_size=BATCH)
    xs, ys = fixed_data()
    history = trainer.fit(xs, ys, batch_size=BATCH, steps_per_epoch=3, verbose=0)
    return {"mode": trainer.mode, "plan_empty": trainer.plan.is_empty, "note": trainer.plan.note,
            "warnings": [str(w.message) for w in caught], "losses": history.step_losses}


def wrap_with_plan(spec, plan_json: str) -> None:
    import ralp
    from ralp.placement.plan import Plan

    ralp.wrap(small_cnn(), spec, mode="ralp", plan=Plan.from_json(plan_json), batch_size=BATCH)


def train_long(spec, steps: int, step_timeout: float = 120.0) -> None:
    import ralp

    trainer = ralp.wrap(small_cnn(), spec, mode="ralp", batch_size=BATCH, threshold=10.0,
                        failures=ralp.Failures(step_timeout=step_timeout))
    x, y = fixed_data()
    trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=steps, verbose=0)


UPDATE_OPS = ("Assign", "ResourceApply", "ResourceScatter")
BRANCHES = {"If": ("then_branch", "else_branch"), "StatelessIf": ("then_branch", "else_branch")}


def section_updates(op, graph) -> list[str]:
    """The variable updates ``op`` runs: itself, or those in a cond's branch functions."""
    if op.type.startswith(UPDATE_OPS):
        return [op.name]
    library = {f.signature.name: f for f in graph.as_graph_def().library.function}

    def inside(function: str) -> list[str]:
        found = []
        for node in library[function].node_def:
            if node.op.startswith(UPDATE_OPS):
                found.append(f"{op.name}/{function}/{node.name}")
            for attr in BRANCHES.get(node.op, ()):
                found += inside(node.attr[attr].func.name)
        return found

    return [name for attr in BRANCHES.get(op.type, ()) for name in inside(op.get_attr(attr).name)]


def sequential_with_callback(spec) -> dict:
    """A keras.Sequential model through RALP, with a Keras callback; and the consistency
    check on the traced step: every update of the tail happens before the PS lock is
    released (each is an ancestor of the critical section's ConsumeMutexLock)."""
    import keras

    import ralp

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((IMAGE, IMAGE, 3)), keras.layers.Conv2D(8, 3, activation="relu", name="conv1"),
         keras.layers.MaxPooling2D(2, name="pool1"), keras.layers.Flatten(name="flatten"),
         keras.layers.Dense(64, activation="relu", name="fc1"), keras.layers.Dense(CLASSES, name="logits")],
        name="seq_cnn",
    )

    class Recorder(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.events = []

        def on_train_begin(self, logs=None):
            self.events.append("train_begin")

        def on_epoch_end(self, epoch, logs=None):
            self.events.append(f"epoch_end {epoch} {sorted(logs)}")

        def on_train_end(self, logs=None):
            self.events.append("train_end")

    recorder = Recorder()
    trainer = ralp.wrap(
        model, spec, mode="ralp", optimizer="adam", batch_size=BATCH, threshold=10.0
    )
    x, y = fixed_data()
    history = trainer.fit(
        x, y, batch_size=BATCH, epochs=2, steps_per_epoch=3, callbacks=[recorder], verbose=0
    )

    graph = [f for f in trainer.runtime.step._list_all_concrete_functions()][-1].graph
    release = [op for op in graph.get_operations() if op.type == "ConsumeMutexLock"]
    ancestors, stack = set(), list(release)
    while stack:
        op = stack.pop()
        for parent in [t.op for t in op.inputs] + list(op.control_inputs):
            if parent.name not in ancestors:
                ancestors.add(parent.name)
                stack.append(parent)
    # (the op in the section's graph, the update): the tail's updates run inside the step
    # ledger's cond, so they are looked up in its branch functions (the graph's library)
    updates = [(op.name, name) for op in graph.get_operations()
               if op.name.startswith("critical_section_execute/")
               for name in section_updates(op, graph)]
    return {"mode": trainer.mode, "offloaded": list(trainer.plan.offloaded), "events": recorder.events,
            "epochs": len(history.history["loss"]), "locks": len(release),
            "updates": [name for _, name in updates],
            "updates_after_release": [name for holder, name in updates if holder not in ancestors],
            "tail_devices": sorted({v.value.device for layer in trainer.model.layers
                                    if layer.name in ("fc1", "logits") for v in layer.variables})}


# ---------------------------------------------------------------- synchronization paradigms


def worker_batches_fn(rounds: int, workers: int):
    """A dataset function giving worker w, at its k-th step, rows [(k W + w) B, ...) of
    fixed_data: one round of W steps covers W consecutive batches."""
    import tensorflow as tf

    x, y = fixed_data(n=rounds * workers * BATCH)

    def dataset_fn(context=None):
        w = context.input_pipeline_id if context is not None else 0
        rows = [r for k in range(rounds) for r in range((k * workers + w) * BATCH,
                                                         (k * workers + w + 1) * BATCH)]
        return tf.data.Dataset.from_tensor_slices((x[rows], y[rows])).batch(BATCH).repeat()

    return dataset_fn


def bsp_weights(spec, mode: str, rounds: int, workers: int) -> dict:
    """BSP on the cluster; the initial weights and the final ones."""
    import keras

    import ralp

    model = small_cnn(0, dropout=0.0)
    initial = [w.copy() for w in model.get_weights()]
    trainer = ralp.wrap(model, spec, mode=mode, optimizer=keras.optimizers.SGD(0.1),
                        batch_size=BATCH, threshold=10.0, sync="bsp")
    history = trainer.fit(worker_batches_fn(rounds, workers), steps_per_epoch=rounds, verbose=0)
    record = history.sync[0]
    iterations = {name: int(opt.iterations.numpy()) for name, opt in trainer.runtime.optimizers.items()}
    return {"initial": initial, "final": trainer.get_weights(), "max_gap": record.max_gap,
            "clocks": list(record.clocks), "iterations": iterations, "mode": trainer.mode}


def sync_sgd_weights(initial, rounds: int, workers: int) -> list:
    """The reference: plain SGD in one process on each round's W batches concatenated."""
    import keras
    import tensorflow as tf

    model = small_cnn(0, dropout=0.0)
    model.set_weights(initial)
    opt = keras.optimizers.SGD(0.1)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x, y = fixed_data(n=rounds * workers * BATCH)
    size = workers * BATCH
    for k in range(rounds):
        xb, yb = x[k * size : (k + 1) * size], y[k * size : (k + 1) * size]
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return model.get_weights()


def synced_run(spec, sync: str, steps: int, slow_worker: str | None, mode: str = "ps") -> dict:
    """Train under ``sync`` with one slow worker; the recorded clocks and starts."""
    import keras

    import ralp
    from ralp.ps_strategy.sync import SlowWorker

    x, y = fixed_data()
    trainer = ralp.wrap(small_cnn(0, dropout=0.0), spec, mode=mode,
                        optimizer=keras.optimizers.SGD(0.05), batch_size=BATCH, threshold=10.0,
                        sync=sync)
    if slow_worker:
        trainer.runtime.slow_worker = SlowWorker.parse(slow_worker)
    history = trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=steps, verbose=0)
    record = history.sync[0]
    iterations = {name: int(opt.iterations.numpy()) for name, opt in trainer.runtime.optimizers.items()}
    return {"record": record.to_dict(), "workers": history.step_workers,
            "losses": history.step_losses, "iterations": iterations, "mode": trainer.mode}


PROBE_RATE = 2.0 ** -10  # exact in float32: the probe counts updates without rounding


def probed_cnn():
    """small_cnn with a counter of its own: a scalar whose loss is itself, so every update of
    plain SGD (rate PROBE_RATE) takes PROBE_RATE off it, however the updates are counted
    elsewhere (the optimizer's count, the step ledger, the sync server)."""
    import keras

    class UpdateProbe(keras.layers.Layer):
        def build(self, input_shape):
            self.count = self.add_weight(shape=(), initializer="zeros", name="count")

        def call(self, x):
            self.add_loss(self.count)
            return x

    model = small_cnn(0, dropout=0.0)
    x = keras.layers.Dense(CLASSES, name="probe_logits")(model.layers[-2].output)
    return keras.Model(model.input, UpdateProbe(name="probe")(x), name="probed_cnn")


def counted_updates(spec, mode: str, sync: str | None, steps: int) -> dict:
    """After ``steps`` updates from concurrent workers: each optimizer's count, and the
    probe's (updates it saw applied)."""
    import keras

    import ralp

    x, y = fixed_data()
    trainer = ralp.wrap(probed_cnn(), spec, mode=mode,
                        optimizer=keras.optimizers.SGD(PROBE_RATE), batch_size=BATCH,
                        threshold=10.0, sync=sync)
    trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=steps, verbose=0)
    counts = {name: int(opt.iterations.numpy())
              for name, opt in trainer.runtime.optimizers.items()}
    probe = trainer.model.get_layer("probe").count
    return {**counts, "probe": -float(probe.numpy()) / PROBE_RATE}


def every_sample_once(spec, rows: int, batch: int) -> dict:
    """One BSP epoch of a model that records which samples it saw: input row i is the
    one-hot vector of sample i, so the (zero-started) kernel's row i moves only in the update
    of i's batch, by 2 x rate / (that batch's rows) for a label of 1 and a squared loss."""
    import keras

    import ralp

    model = keras.Sequential([keras.Input((rows,)), keras.layers.Dense(
        1, use_bias=False, kernel_initializer="zeros", name="seen")], name="ids")
    model.compile(optimizer=keras.optimizers.SGD(PROBE_RATE), loss="mse")
    trainer = ralp.wrap(model, spec, mode="ps", sync="bsp")
    x, y = np.eye(rows, dtype="float32"), np.ones((rows, 1), "float32")
    history = trainer.fit(x, y, batch_size=batch, epochs=1, verbose=0, seed=3)
    return {"kernel": trainer.get_weights()[0][:, 0].tolist(), "updates": len(history.step_losses)}


# ---------------------------------------------------------------- failures


def train_through_failures(spec, mode: str, steps: int, directory: str, every: int,
                           sync: str | None = None, restart_timeout: float = 120.0) -> dict:
    """Train ``steps`` batches with checkpoints, reporting each finished step to the parent
    (which kills tasks at chosen steps); the counts and the failures the history recorded."""
    import dataclasses

    import keras

    import ralp
    from ralp.cluster.fresh_process import report_progress

    class Progress(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            report_progress(("step", batch + 1))

    x, y = fixed_data()
    trainer = ralp.wrap(small_cnn(0, dropout=0.0), spec, mode=mode,
                        optimizer=keras.optimizers.Adam(1e-3), batch_size=BATCH, threshold=10.0,
                        sync=sync, failures=ralp.Failures(step_timeout=60,
                                                          restart_timeout=restart_timeout))
    history = trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=steps, verbose=0,
                          callbacks=[Progress()], checkpoint_dir=directory,
                          checkpoint_every=every)
    return {
        "mode": trainer.mode,
        "steps": len(history.step_losses),
        "iterations": {name: int(opt.iterations.numpy()) for name, opt in trainer.runtime.optimizers.items()},
        "failures": [dataclasses.asdict(f) for f in history.failures],
        "duplicates": history.duplicate_steps,
        "steps_redone": history.steps_redone,
        "total_steps": trainer.runtime.total_steps,
        "resumed_from": history.resumed_from_step,
        "loss": history.history["loss"],
    }


def bad_fit_inputs(spec, directory: str) -> dict:
    """The errors of bad input that only a wrapped model finds: each message, by case."""
    import keras

    import ralp

    x, y = fixed_data()
    trainer = ralp.wrap(small_cnn(0, dropout=0.0), spec, mode="ralp", batch_size=BATCH,
                        threshold=10.0)
    errors = {}
    cases = {
        "zero batch size": lambda: trainer.fit(x, y, batch_size=0, verbose=0),
        "non-integer steps": lambda: trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=2.5,
                                                 verbose=0),
        "checkpoint_every without a directory": lambda: trainer.fit(
            x, y, batch_size=BATCH, steps_per_epoch=2, checkpoint_every=1, verbose=0),
    }
    for case, call in cases.items():
        try:
            call()
        except Exception as e:  # noqa: BLE001 - the message is what the test checks
            errors[case] = f"{type(e).__name__}: {e}"
    trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=2, verbose=0, checkpoint_dir=directory)
    # another model (one input channel: conv1's kernel differs) with the same directory
    other = ralp.wrap(small_cnn(0, dropout=0.0, channels=1), spec, mode="ralp", batch_size=BATCH,
                      threshold=10.0, optimizer=keras.optimizers.Adam(1e-3))
    try:
        other.fit(x[..., :1], y, batch_size=BATCH, steps_per_epoch=2, verbose=0,
                  checkpoint_dir=directory)
    except Exception as e:  # noqa: BLE001
        errors["checkpoint of another model"] = f"{type(e).__name__}: {e}"
    return errors


# ---------------------------------------------------------------- keras.applications models

APP_IMAGE = 32  # the smallest input every family below builds at


def application(name: str, seed: int = 0, compiled: bool = False):
    """A keras.applications classifier (weights=None, softmax output) at 32 px."""
    import keras

    keras.utils.set_random_seed(seed)
    model = getattr(keras.applications, name)(weights=None, input_shape=(APP_IMAGE, APP_IMAGE, 3),
                                              classes=CLASSES)
    if compiled:  # the user's own set-up: wrap must train with it
        model.compile(optimizer=keras.optimizers.SGD(0.02, momentum=0.9),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def application_data(n: int = 3 * BATCH, seed: int = 0):
    rng = np.random.RandomState(seed)
    x = rng.rand(n, APP_IMAGE, APP_IMAGE, 3).astype("float32")
    y = rng.randint(0, CLASSES, size=n).astype("int32")
    return x, y


def application_cluster_losses(spec, name: str, steps: int, compiled: bool) -> dict:
    """``ralp.wrap(..., mode="ralp")`` of a keras.applications model; the compiled model
    brings its optimizer, loss and metrics, the uncompiled one gets its optimizer here and
    the default loss (on the softmax's probabilities)."""
    import keras

    import ralp

    model = application(name, compiled=compiled)
    optimizer = None if compiled else keras.optimizers.SGD(0.02, momentum=0.9)
    trainer = ralp.wrap(model, spec, mode="ralp", optimizer=optimizer, batch_size=BATCH)
    x, y = application_data()
    history = trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=steps, shuffle=False, verbose=0)
    return {"mode": trainer.mode, "offloaded": list(trainer.plan.offloaded),
            "losses": history.step_losses, "history": dict(history.history)}


def application_local_losses(name: str, steps: int) -> list[float]:
    """The reference: the same model and batches in one process, a plain Keras loop."""
    import keras

    loss_fn = keras.losses.SparseCategoricalCrossentropy()  # the models end in a softmax
    return keras_loop_losses(application(name), keras.optimizers.SGD(0.02, momentum=0.9),
                             loss_fn, application_data(), steps)


def wrap_auto(spec, calibration: str | None) -> dict:
    """ralp.wrap's mode auto from ``calibration`` (a JSON path), then a few steps."""
    import ralp

    model = small_cnn()
    weights = model.get_weights()
    trainer = ralp.wrap(model, spec, mode="auto", bandwidth="1gbit", batch_size=BATCH,
                        calibration=calibration)
    # The placed model starts from the weights read after calibrating: those of the user.
    placed = trainer.model.get_weights()
    untouched = all((a == b).all() for a, b in zip(weights, placed, strict=True))
    xs, ys = fixed_data()
    history = trainer.fit(xs, ys, batch_size=BATCH, steps_per_epoch=2, verbose=0)
    return {"mode": trainer.mode, "auto": trainer.auto.to_dict(),
            "plan_empty": trainer.plan.is_empty, "losses": history.step_losses,
            "weights_untouched_by_calibration": untouched}


def fit_like_keras(spec, directory: str, mode: str) -> dict:
    """fit with validation data and Keras' own callbacks, unmodified: EarlyStopping on
    val_loss, CSVLogger, ModelCheckpoint of the weights, and a recorder of the batch logs."""
    import keras

    import ralp

    model = small_cnn()
    x, y = fixed_data(n=96)
    xv, yv = fixed_data(n=32, seed=1)
    trainer = ralp.wrap(model, spec, mode=mode, optimizer=keras.optimizers.SGD(0.05),
                        batch_size=BATCH)
    batch_logs = []
    stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=1, min_delta=10.0)
    callbacks = [
        stopper,
        keras.callbacks.CSVLogger(f"{directory}/log.csv"),
        keras.callbacks.ModelCheckpoint(f"{directory}/weights.weights.h5",
                                        save_weights_only=True),
        keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: batch_logs.append(logs)),
    ]
    history = trainer.fit(x, y, batch_size=BATCH, epochs=6, steps_per_epoch=3,
                          validation_data=(xv, yv), callbacks=callbacks, verbose=0)
    trained = trainer.unwrap().get_weights()  # what ModelCheckpoint saw at the last epoch
    evaluated = trainer.evaluate(xv, yv, return_dict=True, verbose=0)
    split = trainer.fit(x, y, batch_size=BATCH, epochs=3, initial_epoch=1, steps_per_epoch=2,
                        validation_split=0.25, validation_freq=2, verbose=0)
    restored = small_cnn(seed=5)
    restored.load_weights(f"{directory}/weights.weights.h5")
    return {"history": history.history, "stopped_epoch": stopper.stopped_epoch,
            "batch_logs": batch_logs[:3], "batches_logged": len(batch_logs),
            "split_history": split.history,
            "checkpoint_matches": all(np.allclose(a, b) for a, b in
                                      zip(restored.get_weights(), trained, strict=True)),
            "evaluated": evaluated}


def autograph_sources() -> list[str]:
    """Trace a function AutoGraph must convert; the source files of the converted modules
    this process holds (to check they are gone once it has answered)."""
    import sys

    import tensorflow as tf

    from ralp._compat import AUTOGRAPH_MODULE_PREFIX

    @tf.function
    def branchy(x):
        if x > 0:  # a Python if on a tensor: AutoGraph converts it
            return x * 2.0
        return -x

    branchy(tf.constant(1.0))
    return [module.__file__ for name, module in list(sys.modules.items())
            if name.startswith(AUTOGRAPH_MODULE_PREFIX)]


def write_pid_and_sleep(path: str, seconds: float) -> None:
    """A child that says who it is, then outlives any test unless stopped."""
    import os
    import time

    with open(path, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(seconds)


def datasets_made_before_wrap(spec) -> dict:
    """A user's tf.data pipeline made before ``ralp.wrap`` connects to the cluster, used for
    validation, evaluate and predict: each as a plain Keras model on the same weights."""
    import keras
    import tensorflow as tf

    import ralp

    xs, ys = fixed_data()
    data = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(BATCH)
    images = tf.data.Dataset.from_tensor_slices(xs).batch(BATCH)
    model = small_cnn()
    model.compile(keras.optimizers.SGD(0.05), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    trainer = ralp.wrap(model, spec, mode="ps", batch_size=BATCH)
    history = trainer.fit(data, epochs=1, validation_data=data, verbose=0)
    plain = trainer.unwrap()
    return {"val_loss": history.history["val_loss"][-1],
            "evaluated": trainer.evaluate(data, return_dict=True, verbose=0),
            "plain_evaluated": plain.evaluate(xs, ys, batch_size=BATCH, return_dict=True,
                                              verbose=0),
            "predicted_equal": bool(np.allclose(trainer.predict(images, verbose=0),
                                                plain.predict(xs, verbose=0), atol=1e-5))}


# ---------------------------------------------------------------- step timeouts


def train_reporting_progress(spec, mode: str, sync, step_timeout: float, steps: int) -> dict:
    """``steps`` updates of ``small_cnn`` under ``ralp.Failures(step_timeout=step_timeout)``,
    reporting ``("begin", 0)`` when training begins (its first steps not yet run) and
    ``("step", n)`` after each update."""
    import keras

    import ralp
    from ralp.cluster.fresh_process import report_progress

    class Progress(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            report_progress(("begin", 0))

        def on_train_batch_end(self, batch, logs=None):
            report_progress(("step", batch + 1))

    trainer = ralp.wrap(small_cnn(), spec, mode=mode, batch_size=BATCH, threshold=10.0,
                        sync=sync, failures=ralp.Failures(step_timeout=step_timeout))
    x, y = fixed_data()
    history = trainer.fit(x, y, batch_size=BATCH, steps_per_epoch=steps, verbose=0,
                          callbacks=[Progress()])
    return {"mode": trainer.mode, "steps": len(history.step_losses)}


def step_tracings(spec, mode: str, sync) -> dict:
    """Two epochs of ``small_cnn``: how many times the step was traced when training began
    and when it ended."""
    import keras

    import ralp

    trainer = ralp.wrap(small_cnn(), spec, mode=mode, batch_size=BATCH, threshold=10.0,
                        sync=sync)
    counts = {}

    class Count(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            counts["begin"] = trainer.runtime.step_function.experimental_get_tracing_count()

        def on_train_end(self, logs=None):
            counts["end"] = trainer.runtime.step_function.experimental_get_tracing_count()

    x, y = fixed_data()
    trainer.fit(x, y, batch_size=BATCH, epochs=2, steps_per_epoch=4, verbose=0,
                callbacks=[Count()])
    return counts


def keras_application(spec, mode: str) -> dict:
    """``keras.applications.EfficientNetB0`` at 64 px (no weights) on digits, wrapped with the
    defaults (``ralp.Failures()`` included): two short epochs, the losses, and the size of the
    traced step's graph (its nodes and control edges)."""
    import keras
    import numpy as np

    import ralp
    from ralp._compat import concrete_functions
    from ralp.models.digits import digits_arrays, to_model_input

    keras.utils.set_random_seed(0)
    model = keras.applications.EfficientNetB0(weights=None, input_shape=(64, 64, 3),
                                              classes=10)
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    images, labels = digits_arrays()
    x = np.asarray(to_model_input(images[:64], 64))
    trainer = ralp.wrap(model, spec, mode=mode)
    history = trainer.fit(x, labels[:64], batch_size=16, epochs=2, steps_per_epoch=2,
                          verbose=0)
    graph = concrete_functions(trainer.runtime.step)[-1].graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return {"mode": trainer.mode, "loss": history.history["loss"],
            "updates": len(history.step_end_times), "nodes": len(nodes),
            "control_edges": sum(i.startswith("^") for n in nodes for i in n.input)}
