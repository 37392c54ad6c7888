"""One rank of the chaos run's lockstep job (``python -m lab.studies.chaos`` with mode
horovod, stanza or collective starts it on every rank; a supervisor starts the job again after
a lost rank):

    python -m lab.studies.chaos_ranks MODE STEPS BATCH OPTIMIZER LR SCHEDULE SEED \\
        CHECKPOINT_DIR EVERY PIDS_DIR

Every rank writes its process id to PIDS_DIR/rank<r>.pid (the chaos run kills ranks by it),
trains lenet on the digits' training split (each data rank on its shard) with checkpoints,
going on from the newest; rank 0's fit reports each step done (the supervisor's
``RALP_SUPERVISED``) and rank 0, at the end, the test accuracy and what the fit went through.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict


def make_trainer(mode: str, optimizer):
    """The mode's trainer; the collective one first of all TensorFlow work (its strategy
    must come first)."""
    from lab.studies.digits_data import IMAGE
    from ralp.models import build_model

    def build():
        import keras

        keras.utils.set_random_seed(0)
        return build_model("lenet", num_classes=10, image_size=IMAGE)

    import ralp

    if mode == "collective":  # built in the strategy's scope: no restart of TensorFlow
        return ralp.wrap(build, mode=mode, optimizer=optimizer())
    return ralp.wrap(build(), mode=mode, optimizer=optimizer())


BATCH = [32]  # the per-rank batch, set by main before the trainer is made


def main(argv: list[str]) -> None:
    mode, steps, batch, optimizer_name, rate, schedule, seed, ckpt, every, pids = argv
    steps, batch, seed, every, rate = int(steps), int(batch), int(seed), int(every), float(rate)
    BATCH[0] = batch

    def optimizer():
        import keras

        lr = keras.optimizers.schedules.CosineDecay(rate, steps) if schedule == "cosine" else rate
        return {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD}[optimizer_name](lr)

    trainer = make_trainer(mode, optimizer)
    runtime = trainer.runtime
    rank = runtime.rank
    with open(os.path.join(pids, f"rank{rank}.pid"), "w") as f:
        f.write(str(os.getpid()))
    from lab.studies.digits_data import IMAGE, digits_split
    from ralp._messages import emit
    from ralp.models.digits import to_model_input

    x_train, y_train, x_test, y_test = digits_split(seed)
    x_train, x_test = to_model_input(x_train, IMAGE).numpy(), to_model_input(x_test, IMAGE).numpy()
    start = time.perf_counter()  # (rank 0's fit reports each step: RALP_SUPERVISED)
    history = trainer.fit(x_train, y_train, batch_size=batch * runtime.data_workers, epochs=1,
                          steps_per_epoch=steps, seed=seed, checkpoint_dir=ckpt,
                          checkpoint_every=every, verbose=0)
    wall = time.perf_counter() - start
    # Stanza: every rank gathers the weights first
    accuracy = trainer.evaluate(x_test, y_test, return_dict=True, verbose=0)["accuracy"]
    if getattr(runtime, "copy_seconds", None):
        emit("copy_seconds", {"rank": rank, "seconds": runtime.copy_seconds,
                              "waited": runtime.copy_wait_seconds})
    runtime.barrier()
    if rank == 0:
        emit("record", {
            "mode": mode, "accuracy": float(accuracy), "wall_s": round(wall, 2),
            "steps_completed": (history.resumed_from_step or 0) + len(history.step_end_times),
            "resumed_from_step": history.resumed_from_step,
            "steps_redone": history.steps_redone,
            "failures": [asdict(f) for f in history.failures],
            "iterations": runtime.optimizer_state().iterations if mode != "stanza"
            else int(runtime.optimizer.iterations.numpy()),
            # the checkpoints' cost: rank 0's time in saves (every rank waits for them)
            "save_s": round(sum(history.save_seconds), 3), "saves": len(history.save_seconds),
        })
    if mode == "collective":
        runtime.leave_together()


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main(sys.argv[1:])
