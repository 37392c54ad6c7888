"""Pulling a model's variables in batches at the start of a worker's step (iBatch, Wang 2019).

Under ParameterServerStrategy every variable a layer reads is its own receive, and all of them
are issued when the step starts: they share the worker's link and finish in whatever order
the transfers do. A *batched* pull instead sends each batch of layers' variables as one
message per PS task and dtype: the PS packs them (one flat concat), the worker unpacks them
(split and reshape). With ``chained`` pulls, a batch is packed only once the previous batch
has arrived on the worker, so batches arrive one after the other, as iBatch's model has it.

The forward pass then runs on the pulled values (``Layer.stateless_call``): each layer's ops
depend on its own batch only, so the forward of batch k overlaps the pull of batch k+1.
Gradients are taken with respect to the pulled values (the same numbers as the variables),
and state the forward pass updates (batch-norm statistics, dropout's seed) is assigned back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import tensorflow as tf

from ralp._compat import variable_device


@dataclass(frozen=True)
class BatchedPulls:
    """How one model's variables are pulled: the batches, as indices into
    ``trainable + non_trainable`` (``model.trainable_variables``, then
    ``model.non_trainable_variables``), in pull order."""

    trainable: tuple
    non_trainable: tuple
    batches: tuple[tuple[int, ...], ...]
    chained: bool = True

    def values(self) -> tuple[list, list]:
        """The pulled values (tensors on this worker), as the trainable and the non-trainable
        lists ``stateless_call`` takes. Call inside the step function."""
        variables = (*self.trainable, *self.non_trainable)
        values: list = [None] * len(variables)
        arrived: list = []
        for b, batch in enumerate(self.batches):
            groups: dict[tuple[str, tf.DType], list[int]] = {}
            for i in batch:
                v = variables[i].value  # the backing tf.Variable
                if v.dtype.is_floating:
                    groups.setdefault((variable_device(v), v.dtype), []).append(i)
                else:  # integer state (a dropout seed): read as is, a few bytes
                    values[i] = tf.identity(v)
            now: list = []
            for (device, _), members in groups.items():
                after = arrived if self.chained else []
                with tf.device(device), tf.control_dependencies(after):
                    # named, so the audit finds a batch's message in the partitions (a batch
                    # of one variable is its flattened read: the concat goes)
                    packed = tf.concat([tf.reshape(variables[i].value, [-1],
                                                   name=f"ralp_pull_{b}_flat")
                                        for i in members], axis=0, name=f"ralp_pull_{b}")
                sizes = [variables[i].value.shape.num_elements() for i in members]
                parts = tf.split(packed, sizes, name=f"ralp_unpack_{b}")  # on the worker
                for i, part in zip(members, parts, strict=True):
                    values[i] = tf.reshape(part, variables[i].value.shape)
                now.append(parts[0])
            arrived = now or arrived
        n = len(self.trainable)
        return values[:n], values[n:]

    def assign_state(self, new_non_trainable: Sequence) -> None:
        """Write back the state the forward pass updated (where it changed)."""
        for v, new in zip(self.non_trainable, new_non_trainable, strict=True):
            if new is not None:
                v.assign(new)


def batched_pulls(model, layer_batches: Sequence[Sequence[str]], chained: bool = True) -> BatchedPulls:
    """The pulls of ``model`` (a Keras model) in ``layer_batches`` (names of its layers, each
    batch in forward order); variables of layers no batch names are pulled last."""
    trainable = tuple(model.trainable_variables)
    non_trainable = tuple(model.non_trainable_variables)
    index = {id(v): k for k, v in enumerate((*trainable, *non_trainable))}
    batches, seen = [], set()
    for names in layer_batches:
        members = []
        for name in names:
            for v in model.get_layer(name).variables:
                k = index.get(id(v))
                if k is not None and k not in seen:
                    seen.add(k)
                    members.append(k)
        if members:
            batches.append(tuple(members))
    rest = tuple(k for k in range(len(index)) if k not in seen)
    if rest:
        batches.append(rest)
    return BatchedPulls(trainable, non_trainable, tuple(batches), chained)
