"""The allreduce modes' reductions as the traced step's graph has them: for each reduction op
(Horovod's allreduce, TensorFlow's collective all-reduce), the layers whose gradients it sums
(as ralp names them) and the layers whose backward-pass ops it waits for, through data edges
and through data or control edges (TensorFlow chains a replica's collectives).

A reduction can start before the backward pass ends when it waits for no backward op of a
layer before its own (the backward pass reaches those last). Run by the overlap tests on every
rank of a real job:

    python tests/training/reduction_graph.py OUT_DIR horovod|stanza|collective [FC_WORKERS]

trains one step of :func:`net` and writes ``OUT_DIR/rank<r>.json``: its reductions.
"""

from __future__ import annotations

import json
import re
import sys

LAYERS = ("conv1", "conv2", "fc1", "logits")  # forward order; fc1's kernel is 2.4 MB
REDUCTIONS = ("HorovodAllreduce", "HorovodGroupedAllreduce", "CollectiveReduceV2")


def net():
    import keras

    keras.utils.set_random_seed(0)
    x = inputs = keras.Input((16, 16, 3), name="images")
    x = keras.layers.Conv2D(8, 3, activation="relu", name="conv1")(x)
    x = keras.layers.Conv2D(8, 3, activation="relu", name="conv2")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(512, activation="relu", name="fc1")(x)
    return keras.Model(inputs, keras.layers.Dense(10, name="logits")(x), name="net")


def backward_layer(op_name: str) -> str | None:
    """The layer of :data:`LAYERS` whose backward pass an op is part of (None: not one)."""
    found = re.search(r"(?:^|/)gradient_tape/(.*)", op_name)
    if found is None:
        return None
    for part in found.group(1).split("/"):
        layer = re.sub(r"_\d+$", "", part)  # Keras' call scope: conv1_1
        if layer in LAYERS:
            return layer
    return None


def _ancestors(op, control: bool) -> set:
    seen, todo = set(), [op]
    while todo:
        current = todo.pop()
        for parent in [t.op for t in current.inputs] + (list(current.control_inputs)
                                                        if control else []):
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen


def reductions(graph) -> dict[str, dict]:
    """Reduction op name -> its type and the layers whose backward ops it waits for, through
    data edges (``data``) and through data or control edges (``all``)."""
    found = {}
    for op in graph.get_operations():
        if op.type in REDUCTIONS:
            found[op.name] = {"type": op.type, **{
                key: sorted({layer for a in _ancestors(op, control)
                             if (layer := backward_layer(a.name)) is not None})
                for key, control in (("data", False), ("all", True))}}
    return found


def waits_too_long(found: dict[str, dict], order=LAYERS) -> list[str]:
    """The reductions that wait for the backward pass of a layer before the first they sum
    (whose gradients the backward pass produces later): each with what it waits for."""
    late = []
    for name, r in found.items():
        if r["sums"]:
            first = min(order.index(layer) for layer in r["sums"])
            if any(order.index(layer) < first for layer in r["all"]):
                late.append(f"{name} sums {r['sums']} but waits for {r['all']}")
    return late


def _sums(mode: str, runtime) -> dict[str, list[str]]:
    """What ralp names each gradient reduction of this rank's step: name -> its layers."""
    from ralp.horovod.runtime import GRADIENT
    from ralp.horovod.stanza import HEAD_GRADS, TAIL_GRADS

    def layer(v) -> str:
        return v.path.split("/")[0]

    if mode == "horovod":
        return {GRADIENT.format(k): [layer(v)]
                for k, v in enumerate(runtime.model.trainable_variables)}
    if mode == "stanza":
        prefix = TAIL_GRADS if runtime.is_fc else HEAD_GRADS
        return {f"{prefix}_{k}": [layer(v)] for k, v in enumerate(runtime.variables)}
    variables = runtime.model.trainable_variables
    return {f"ralp_bucket_{k}/CollectiveReduceV2": sorted({layer(variables[i]) for i in bucket})
            for k, bucket in enumerate(runtime.buckets)}


def main(out_dir: str, mode: str, fc_workers: int = 1) -> None:
    import keras
    import numpy as np

    import ralp
    from ralp._compat import concrete_functions

    trainer = ralp.wrap(net(), mode=mode, optimizer=keras.optimizers.SGD(0.01),
                        **({"fc_workers": fc_workers} if mode == "stanza" else {}))
    runtime = trainer.runtime
    batch = 4 * runtime.data_workers
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, 16, 16, 3)).astype("float32")
    trainer.fit(x, rng.integers(0, 10, batch), batch_size=batch, epochs=1, verbose=0)
    found = reductions(concrete_functions(runtime.step_function)[-1].graph)
    sums = _sums(mode, runtime)
    for name, r in found.items():
        r["sums"] = sums.get(name, [])
    with open(f"{out_dir}/rank{runtime.rank}.json", "w") as f:
        json.dump({"role": "fc" if getattr(runtime, "is_fc", False) else "data",
                   "reductions": found, "named": sorted(sums)}, f)
    runtime.barrier()  # every rank has written its file
    if mode == "collective":
        runtime.leave_together()
    elif runtime.rank == 0:  # the Horovod launcher's sign that the job finished
        from ralp._messages import emit

        emit("record", {"ranks": runtime.size})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))
