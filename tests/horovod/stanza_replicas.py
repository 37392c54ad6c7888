"""Run by the tests under ``horovodrun -np N``: train lenet on real digits with StanzaTrainer.

    python tests/horovod/stanza_replicas.py OUT_DIR STEPS BATCH FC_WORKERS [--die-at=STEP:TOKEN]

CONV rank c trains on rows [c*BATCH, (c+1)*BATCH) of step k's block of n_c*BATCH digits (block
k starts at row k*n_c*BATCH), so the CONV ranks together see exactly the concatenated batch a
single process would; FC ranks read no data. Each rank saves the weights it starts from (after
the broadcast), the trained model's weights (after ``share_weights``) and its losses to
OUT_DIR/rank<r>.npz. With ``--die-at``, the first FC rank exits abruptly after step STEP
(TOKEN marks the processes, for the test to check that none is left).
"""

from __future__ import annotations

import os
import sys

IMAGE_SIZE = 28
LEARNING_RATE = 0.05
MOMENTUM = 0.9


def main() -> None:
    out_dir, steps, batch, fc_workers = sys.argv[1], *map(int, sys.argv[2:5])
    die_at = int(sys.argv[5].split("=")[1].split(":")[0]) if len(sys.argv) > 5 else None
    import horovod.tensorflow as hvd
    import keras
    import numpy as np

    from ralp.horovod.stanza import StanzaTrainer
    from ralp.models import build_model
    from ralp.models.digits import digits_arrays, to_model_input

    hvd.init(process_sets="dynamic")
    rank = hvd.rank()
    # A different seed per rank: the parts agree only if the broadcast works.
    keras.utils.set_random_seed(100 + rank)
    model = build_model("lenet", num_classes=10, image_size=IMAGE_SIZE)
    optimizer = keras.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM)
    trainer = StanzaTrainer(hvd, model, optimizer, fc_workers=fc_workers, batch_size=batch)
    initial = trainer.weights()

    images, labels = digits_arrays(seed=0)
    n_c = trainer.layout.conv_workers

    def batches():
        for k in range(steps):
            start = k * n_c * batch + rank * batch
            rows = slice(start, start + batch)
            yield to_model_input(images[rows], IMAGE_SIZE), labels[rows]

    def on_step(k: int, _loss) -> None:
        if k == die_at and rank == trainer.layout.fc_ranks[0]:
            os._exit(3)  # no clean-up, no message: as a crashed machine would

    history = trainer.run_steps(None if trainer.is_fc else batches(), steps, on_step=on_step)
    final = [w.numpy() for w in trainer.share_weights().weights]
    arrays = {f"initial_{i}": w for i, w in enumerate(initial)}
    arrays.update({f"final_{i}": w for i, w in enumerate(final)})
    arrays["losses"] = np.array(history.step_losses)
    arrays["final_loss"] = np.array(history.final_loss)
    arrays["is_fc"] = np.array(trainer.is_fc)
    np.savez(f"{out_dir}/rank{rank}.npz", **arrays)


if __name__ == "__main__":
    main()
