"""Run by the tests under ``horovodrun -np N``: train lenet on real digits in mode "stanza",
the first FC rank exiting abruptly after step STEP (TOKEN marks the processes, for the test to
check that none is left).

    python tests/horovod/stanza_replicas.py OUT_DIR STEPS BATCH FC_WORKERS --die-at=STEP:TOKEN
"""

from __future__ import annotations

import os
import sys

IMAGE_SIZE = 28


def main() -> None:
    steps, batch, fc_workers = map(int, sys.argv[2:5])  # (argv[1]: the test's directory)
    die_at = int(sys.argv[5].split("=")[1].split(":")[0])
    import keras

    import ralp
    from ralp.models import build_model
    from ralp.models.digits import digits_arrays, to_model_input

    model = build_model("lenet", num_classes=10, image_size=IMAGE_SIZE)
    trainer = ralp.wrap(model, mode="stanza", fc_workers=fc_workers,
                        optimizer=keras.optimizers.SGD(learning_rate=0.05, momentum=0.9))
    runtime = trainer.runtime
    images, labels = digits_arrays(seed=0)
    n_c = runtime.layout.conv_workers
    x, y = to_model_input(images[:steps * n_c * batch], IMAGE_SIZE).numpy(), labels

    def on_step(step, logs) -> None:
        if step == die_at and runtime.rank == runtime.layout.fc_ranks[0]:
            os._exit(3)  # no clean-up, no message: as a crashed machine would

    trainer.fit(x, y[:len(x)], batch_size=n_c * batch, steps_per_epoch=steps, verbose=0,
                callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=on_step)])


if __name__ == "__main__":
    main()
