"""A user's training script, written from the README's quick start, with the Keras habits a
user brings: a compiled model of their own (a keras.io-style convnet, one-hot labels,
categorical cross-entropy, "accuracy" and AUC), arrays with class weights and a validation
split, Keras' callbacks (EarlyStopping, CSVLogger, TensorBoard), a ``tf.data.Dataset`` with
sample weights and a validation dataset, a dataset function, ``evaluate``, ``predict``, and
``unwrap()`` -> save -> load -> ``fit`` on. Only the mode changes:

    ralp.run_in_fresh_process(train, MODE, OUT_DIR, cluster_spec)   # ps, ralp, auto
    horovodrun -np 3 python tests/training/user_script.py OUT_DIR horovod|stanza
    (every worker, with TF_CONFIG) python tests/training/user_script.py OUT_DIR collective

It returns (and rank 0 writes to OUT_DIR/report.json) what the tests check.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

import numpy as np

CLASSES, IMAGE, BATCH = 4, 12, 12  # BATCH: the global batch, two CONV ranks' 6 each in stanza


def build_model():
    import keras

    keras.utils.set_random_seed(1)
    inputs = keras.Input((IMAGE, IMAGE, 1))
    x = keras.layers.Conv2D(8, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(16, 3, activation="relu")(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(32, activation="relu")(x)
    outputs = keras.layers.Dense(CLASSES, activation="softmax")(x)
    model = keras.Model(inputs, outputs, name="my_convnet")
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="categorical_crossentropy",
                  metrics=["accuracy", keras.metrics.AUC(name="auc")])
    return model


def load_data(rows: int = 96):
    rng = np.random.default_rng(0)
    x = rng.random((rows, IMAGE, IMAGE, 1), dtype=np.float32)
    labels = (x[:, :6].mean(axis=(1, 2, 3)) > x[:, 6:].mean(axis=(1, 2, 3))).astype(int)
    labels += 2 * (x[:, :, :6].mean(axis=(1, 2, 3)) > 0.5)
    return x, np.eye(CLASSES, dtype=np.float32)[labels]


def _tensorboard_tags(log_dir: str) -> dict:
    import glob
    import os

    import tensorflow as tf

    tags = {}
    for path in glob.glob(f"{log_dir}/*/events*"):
        found = set()
        for event in tf.compat.v1.train.summary_iterator(path):
            found |= {v.tag for v in event.summary.value}
        tags[os.path.basename(os.path.dirname(path))] = sorted(found)
    return tags


def train(mode: str, out_dir: str, cluster=None) -> dict:
    import keras
    import tensorflow as tf

    import ralp

    model = build_model()
    trainer = ralp.wrap(model, cluster, mode=mode, batch_size=BATCH)
    chief = getattr(trainer.runtime, "rank", 0) == 0
    x, y = load_data()
    x_test, y_test = load_data(24)

    # 1. arrays, one-hot labels, class weights, a validation split, Keras' callbacks
    callbacks = [keras.callbacks.EarlyStopping(monitor="val_loss", patience=5)]
    if chief:  # files from one process only, as Keras' docs advise for multi-worker fits
        callbacks += [keras.callbacks.CSVLogger(f"{out_dir}/log.csv"),
                      keras.callbacks.TensorBoard(f"{out_dir}/tb")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        arrays = trainer.fit(x, y, epochs=2, validation_split=0.25, callbacks=callbacks,
                             class_weight={0: 1.0, 1: 2.0, 2: 1.0, 3: 0.5}, verbose=2)

    # 2. a tf.data pipeline with sample weights, validated on a dataset
    weights = np.linspace(0.5, 1.5, len(x)).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices((x, y, weights)).shuffle(96, seed=2).batch(
        BATCH)
    validation = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(8)
    pipeline = trainer.fit(dataset, epochs=1, validation_data=validation, verbose=0)

    # 3. a dataset function: each worker reads its shard, batched for its part of a step
    def dataset_fn(context):
        batch = context.get_per_replica_batch_size(BATCH)
        return (tf.data.Dataset.from_tensor_slices((x, y))
                .shard(context.num_input_pipelines, context.input_pipeline_id)
                .repeat().batch(batch, drop_remainder=True))

    function = trainer.fit(dataset_fn, epochs=1, steps_per_epoch=3, verbose=0)

    # 4. Keras' evaluate and predict
    evaluated = trainer.evaluate(x_test, y_test, return_dict=True, verbose=0)
    predicted = trainer.predict(x_test, verbose=0)
    plain = trainer.unwrap()
    same_prediction = float(np.max(np.abs(predicted - plain.predict(x_test, verbose=0))))

    # 5. unwrap -> save -> load -> fit on, with the trained optimizer state
    path = f"{out_dir}/model{getattr(trainer.runtime, 'rank', 0)}.keras"
    plain.save(path)
    loaded = keras.models.load_model(path)
    steps_before = int(loaded.optimizer.iterations)
    loaded.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    report = {
        "mode": trainer.mode,
        "arrays": arrays.history, "printed": printed.getvalue(),
        "pipeline": pipeline.history, "function": function.history,
        "evaluated": evaluated, "plain_evaluated": plain.evaluate(x_test, y_test,
                                                                  return_dict=True, verbose=0),
        "same_prediction": same_prediction, "prediction_shape": list(predicted.shape),
        "updates": len(arrays.step_losses) + len(pipeline.step_losses)
        + len(function.step_losses),
        "steps_before": steps_before, "steps_after": int(loaded.optimizer.iterations),
        "batches_per_epoch": -(-len(x) // BATCH),
        "tensorboard": _tensorboard_tags(f"{out_dir}/tb") if chief else {},
    }
    if chief:
        with open(f"{out_dir}/report.json", "w") as f:
            json.dump(report, f)
    return report


if __name__ == "__main__":
    done = train(sys.argv[2], sys.argv[1])
    if sys.argv[2] != "collective" and done["tensorboard"]:  # rank 0: the launcher's sign
        from ralp._messages import emit

        emit("record", {"mode": done["mode"]})
