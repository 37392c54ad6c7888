"""Run by the tests under ``horovodrun``: Keras' fit on a rank trainer, with validation and
Keras' own callbacks, unmodified.

    python tests/horovod/keras_fit_ranks.py OUT_DIR horovod|stanza

Every rank trains lenet on the same digits arrays (each data rank on its shard) with
validation data, EarlyStopping on val_loss (a min_delta so large that it stops after its
patience), a CSVLogger (rank 0 only) and a recorder of the batch logs, and writes what it saw
to OUT_DIR/rank<r>.json.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    out_dir, kind = sys.argv[1], sys.argv[2]
    import horovod.tensorflow as hvd
    import keras

    import ralp
    from ralp.models import build_model
    from ralp.models.digits import digits_arrays, to_model_input

    keras.utils.set_random_seed(7)
    model = build_model("lenet", num_classes=10, image_size=28)
    trainer = ralp.wrap(model, mode=kind, optimizer=keras.optimizers.SGD(learning_rate=0.05))
    rank = hvd.rank()
    images, labels = digits_arrays(seed=0)
    x, y = to_model_input(images[:256], 28).numpy(), labels[:256]
    xv, yv = to_model_input(images[256:320], 28).numpy(), labels[256:320]
    batch_logs = []
    stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=1, min_delta=10.0)
    callbacks = [stopper, keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda b, logs: batch_logs.append(dict(logs or {})))]
    if rank == 0:
        callbacks.append(keras.callbacks.CSVLogger(f"{out_dir}/log.csv"))
    history = trainer.fit(x, y, batch_size=16 * trainer.runtime.data_workers, epochs=5,
                          steps_per_epoch=3, validation_data=(xv, yv), callbacks=callbacks)
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump({"history": history.history, "stopped_epoch": stopper.stopped_epoch,
                   "batch_logs": batch_logs}, f)
    import tensorflow as tf

    hvd.allreduce(tf.constant(0.0), name="files_written")  # every rank has written its file
    if rank == 0:  # the launcher's sign that the job finished (ralp.horovod.launch)
        from ralp._messages import emit

        emit("record", {"ranks": hvd.size()})


if __name__ == "__main__":
    main()
