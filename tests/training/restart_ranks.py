"""Run by the tests as every rank of a lockstep job (Horovod's, Stanza's or the collective
one) that checkpoints, and that may lose a rank:

    python tests/training/restart_ranks.py OUT_DIR horovod|stanza|collective [CRASH_RANK CRASH_STEP]

Every rank trains lenet on the same digits arrays (each data rank on its shard) for 2 epochs
of 6 steps with checkpoints every 4 steps in OUT_DIR/ckpt, going on from the newest one there.
With CRASH_RANK, that rank SIGKILLs itself once CRASH_STEP steps of the fit are done (after
the step, before the next). Each rank writes OUT_DIR/rank<r>.json (the fit's history and
failures, where its tail came from) and rank 0 OUT_DIR/weights.npz (the trained model).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import asdict

EPOCHS, STEPS_PER_EPOCH, EVERY, BATCH = 2, 6, 4, 8


def build():
    import keras

    from ralp.models import build_model

    keras.utils.set_random_seed(7)
    return build_model("lenet", num_classes=10, image_size=28)


def make_trainer(kind: str):
    import keras

    import ralp

    # collective: the model is built in the strategy's scope (a function)
    model = build if kind == "collective" else build()
    return ralp.wrap(model, mode=kind, optimizer=keras.optimizers.Adam(1e-3))


def main() -> None:
    out_dir, kind = sys.argv[1], sys.argv[2]
    crash_rank, crash_step = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (-1, 0)
    trainer = make_trainer(kind)
    import keras
    import numpy as np

    from ralp.models.digits import digits_arrays, to_model_input

    runtime = trainer.runtime
    rank = runtime.rank
    images, labels = digits_arrays(seed=0)
    x, y = to_model_input(images[:400], 28).numpy(), labels[:400]
    done = [0]

    def after_step(batch, logs):
        done[0] += 1
        if rank == crash_rank and done[0] == crash_step:
            os.kill(os.getpid(), signal.SIGKILL)

    history = trainer.fit(x, y, batch_size=BATCH * runtime.data_workers, epochs=EPOCHS,
                          steps_per_epoch=STEPS_PER_EPOCH, seed=1, verbose=0,
                          checkpoint_dir=f"{out_dir}/ckpt", checkpoint_every=EVERY,
                          callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=after_step)])
    weights = trainer.get_weights()  # stanza: gathered from both parts (every rank calls it)
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump({"history": history.history, "resumed_from_step": history.resumed_from_step,
                   "failures": [asdict(x) for x in history.failures],
                   "steps_done": done[0],
                   "tail_restored_from": getattr(runtime, "tail_restored_from", None),
                   "copy_seconds": getattr(runtime, "copy_seconds", []),
                   "save_seconds": history.save_seconds}, f)
    if rank == 0:
        np.savez(f"{out_dir}/weights.npz", *weights)
    runtime.barrier()
    if kind == "collective":
        runtime.leave_together()
    elif rank == 0:  # the Horovod launcher's sign that the job finished
        from ralp._messages import emit

        emit("record", {"ranks": runtime.size})


if __name__ == "__main__":
    main()
