"""Run by the tests under ``horovodrun -np 2``: train lenet on real digits with HorovodTrainer.

    python tests/horovod/hvd_replicas.py OUT_DIR STEPS BATCH

Rank r trains on rows [r*BATCH, (r+1)*BATCH) of step k's block of 2*BATCH digits (block k
starts at row k*2*BATCH), so the two ranks together see exactly the concatenated batch a
single process would. Each rank saves its initial weights (after the broadcast) and its final
weights to OUT_DIR/rank<r>.npz. The model is compiled (optimizer, loss on logits, accuracy)
and the trainer is given nothing else: it must train with the user's compiled set-up.
"""

from __future__ import annotations

import sys

IMAGE_SIZE = 28
LEARNING_RATE = 0.05


def main() -> None:
    out_dir, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    import horovod.tensorflow as hvd
    import keras
    import numpy as np

    from ralp.horovod.trainer import HorovodTrainer
    from ralp.models import build_model
    from ralp.models.digits import digits_arrays, to_model_input

    hvd.init()
    rank = hvd.rank()
    # A different seed per rank: the replicas agree only if the broadcast works.
    keras.utils.set_random_seed(100 + rank)
    model = build_model("lenet", num_classes=10, image_size=IMAGE_SIZE)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=LEARNING_RATE),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    trainer = HorovodTrainer(hvd, model)  # the compiled optimizer, loss and metrics
    initial = trainer.weights()

    images, labels = digits_arrays(seed=0)
    size = hvd.size()

    def batches():
        for k in range(steps):
            start = k * size * batch + rank * batch
            rows = slice(start, start + batch)
            yield to_model_input(images[rows], IMAGE_SIZE), labels[rows]

    history = trainer.run_steps(batches(), steps)
    final = trainer.weights()
    arrays = {f"initial_{i}": w for i, w in enumerate(initial)}
    arrays.update({f"final_{i}": w for i, w in enumerate(final)})
    arrays["losses"] = np.array(history.step_losses)
    arrays["accuracy"] = np.array(history.step_metrics["accuracy"])
    np.savez(f"{out_dir}/rank{rank}.npz", **arrays)


if __name__ == "__main__":
    main()
