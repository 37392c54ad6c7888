"""What crosses Stanza's split, packed for Horovod's alltoall (no Horovod needed): one
matrix per kind of head output, and the head's outputs back from them unchanged."""

import numpy as np
import tensorflow as tf

from ralp.horovod.stanza_boundary import Boundary, collective_name
from ralp.placement.choose import choose_plan
from ralp.placement.rewriter import PlacedModel, split_model
from tests.placement.test_rewriter import _features, _two_input_model


def _boundary(ids: bool):
    model = _two_input_model(ids)
    choice = choose_plan(model, "ralp", workers=1, num_ps=1, batch_size=8)
    split = split_model(PlacedModel(model, choice.plan, {}))
    return split, Boundary.of(split)


def test_activations_and_a_raw_input_cross_in_groups_of_their_own():
    split, boundary = _boundary(ids=True)
    names = [t.name for t in split.head.outputs]
    raw = names.index("meta")
    kinds = {(g.dtype.name, g.computed) for g in boundary.groups}
    assert kinds == {("float32", True), ("int32", False)}
    assert [g.indices for g in boundary.groups if not g.computed] == [(raw,)]
    assert all(g.computed for g in boundary.computed)
    # a float raw input is a group of its own too: no gradient is sent back for it
    _, floats = _boundary(ids=False)
    assert {(g.dtype.name, g.computed) for g in floats.groups} == {("float32", True),
                                                                   ("float32", False)}
    assert [collective_name("x", k) for k in range(3)] == ["x", "x_1", "x_2"]


def test_pack_and_unpack_give_the_heads_outputs_back():
    for ids in (False, True):
        split, boundary = _boundary(ids)
        outputs = split.head(list(_features(ids)))
        packed = boundary.pack(outputs, 2)
        assert [tuple(m.shape) for m in packed] == [(2, g.width) for g in boundary.groups]
        for got, sent in zip(boundary.unpack(packed, 2), outputs, strict=True):
            assert got.dtype == sent.dtype
            np.testing.assert_array_equal(got, sent)
        stacked = boundary.unpack([tf.concat([m, m], 0) for m in packed], 4)  # an FC rank's
        np.testing.assert_allclose(split.tail(stacked)[:2], split.tail(outputs), rtol=1e-6)
