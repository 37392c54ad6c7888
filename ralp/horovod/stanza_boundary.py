"""What crosses Stanza's split, packed for Horovod's alltoall: the head's outputs, as rows.

A CONV rank sends its K rows of every head output to its FC rank, and gets the gradient of
each output the head computed back. ``hvd.alltoall`` moves one tensor of rows per call, so
the outputs are packed into groups, one ``[rows, width]`` matrix per group, each output
flattened to its width: outputs of one dtype that the head computes form one group; a model
input that an offloaded layer reads (it crosses as it is, :class:`ralp.placement.rewriter.
Split`) goes in a group of its dtype of its own, since no gradient goes back for it. A model
of one input crossing nothing but float activations has one group, as before. Every rank
derives the same groups from the same model, so each group's collective has the same name
on every rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    """Head outputs packed side by side: their indices, widths and the group's dtype."""

    indices: tuple[int, ...]
    widths: tuple[int, ...]
    dtype: object  # a tf.DType
    computed: bool  # the head computes these (a gradient goes back), or model inputs

    @property
    def width(self) -> int:
        return sum(self.widths)


@dataclass(frozen=True)
class Boundary:
    """The head's outputs: per-sample shapes, and their :class:`Group` s."""

    shapes: tuple[tuple[int, ...], ...]
    groups: tuple[Group, ...]

    @classmethod
    def of(cls, split) -> Boundary:
        import tensorflow as tf

        outputs = split.head.outputs
        shapes = tuple(tuple(t.shape[1:]) for t in outputs)
        keys: dict[tuple, list[int]] = {}
        for index, (tensor, computed) in enumerate(zip(outputs, split.has_gradient(),
                                                       strict=True)):
            keys.setdefault((tf.as_dtype(tensor.dtype), computed), []).append(index)
        groups = tuple(Group(tuple(ix), tuple(math.prod(shapes[i]) for i in ix), dtype, computed)
                       for (dtype, computed), ix in keys.items())
        return cls(shapes, groups)

    @property
    def computed(self) -> tuple[Group, ...]:
        """The groups a gradient goes back for."""
        return tuple(g for g in self.groups if g.computed)

    def pack(self, outputs, rows: int, groups=None) -> list:
        """One ``[rows, width]`` matrix per group of ``groups`` (default: every group)."""
        import tensorflow as tf

        return [tf.concat([tf.reshape(outputs[i], [rows, w])
                           for i, w in zip(g.indices, g.widths, strict=True)], axis=1)
                for g in (self.groups if groups is None else groups)]

    def unpack(self, packed, rows: int) -> list:
        """The head's outputs, shaped, from one matrix per group (every group)."""
        import tensorflow as tf

        outputs: list = [None] * len(self.shapes)
        for group, matrix in zip(self.groups, packed, strict=True):
            parts = tf.split(matrix, list(group.widths), axis=1) if len(group.widths) > 1 \
                else [matrix]
            for i, part in zip(group.indices, parts, strict=True):
                outputs[i] = tf.reshape(part, [rows, *self.shapes[i]])
        return outputs


def collective_name(base: str, k: int) -> str:
    """The name of group ``k``'s collective (the first keeps the base name)."""
    return base if k == 0 else f"{base}_{k}"
