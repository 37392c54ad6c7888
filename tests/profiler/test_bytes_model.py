"""Byte model per training step against hand-computed cases."""

import pytest

from ralp.profiler.bytes_model import (
    LinkBytes,
    horovod_traffic,
    mode_traffic,
    placed_traffic,
    ps_traffic,
    ralp_traffic,
)
from ralp.profiler.layer_table import LayerRow, LayerTable
from ralp.profiler.ps_assignment import round_robin, spread_layers

BATCH = 8


def row(index, name, kind, params, out_elems, inbound=(), trainable=True):
    return LayerRow(
        index=index, name=name, layer_type=kind, kind=kind, params=params,
        trainable_params=params if trainable else 0, param_bytes=4 * params,
        trainable_param_bytes=4 * params if trainable else 0,
        output_shape=(out_elems,), output_elements=out_elems,
        output_bytes=4 * out_elems * BATCH, flops=0, cumulative_params=0, inbound=inbound,
    )


@pytest.fixture
def tiny():
    """input -> conv (10 + 2 params) -> pool (out 6/sample) -> fc (100 + 5) -> fc2 (20 + 4)."""
    rows = (
        row(0, "in", "other", 0, 12),
        row(1, "conv", "conv", 12, 24, ("in",)),
        row(2, "pool", "pool", 0, 6, ("conv",)),
        row(3, "fc", "fc", 105, 5, ("pool",)),
        row(4, "fc2", "fc", 24, 4, ("fc",)),
    )
    variables = (
        ("conv", "conv/kernel", 40), ("conv", "conv/bias", 8),
        ("fc", "fc/kernel", 400), ("fc", "fc/bias", 20),
        ("fc2", "fc2/kernel", 80), ("fc2", "fc2/bias", 16),
    )
    return LayerTable("tiny", BATCH, rows, ("fc2",), variables)


def test_plain_ps_moves_every_variable_twice_per_worker(tiny):
    S = 40 + 8 + 400 + 20 + 80 + 16  # 564 model bytes
    t = ps_traffic(tiny, workers=3, ps=1)
    assert t.total == 2 * S * 3
    assert t.worker_link == LinkBytes(tx=S, rx=S)
    assert t.ps_links == (LinkBytes(tx=3 * S, rx=3 * S),)
    assert t.breakdown == {"variables": 2 * S * 3, "activations": 0, "labels": 0}


def test_plain_ps_round_robin_over_two_ps(tiny):
    t = ps_traffic(tiny, workers=2, ps=2)
    on_ps0 = 40 + 400 + 80  # variables 0, 2, 4
    on_ps1 = 8 + 20 + 16
    assert t.ps_links == (LinkBytes(2 * on_ps0, 2 * on_ps0), LinkBytes(2 * on_ps1, 2 * on_ps1))
    assert t.total == 2 * 2 * (on_ps0 + on_ps1)


def test_ralp_moves_kept_variables_boundary_activations_and_labels(tiny):
    W = 2
    t = ralp_traffic(tiny, {"fc": 0, "fc2": 0}, workers=W, ps=1)
    kept = 40 + 8
    boundary = 4 * 6 * BATCH  # pool output, per worker batch
    labels = 4 * BATCH
    per_worker_tx = kept + boundary + labels  # gradient push, activations, labels
    per_worker_rx = kept + boundary  # pull, activation gradient
    assert t.worker_link == LinkBytes(per_worker_tx, per_worker_rx)
    assert t.ps_links == (LinkBytes(W * per_worker_rx, W * per_worker_tx),)
    assert t.total == W * (2 * kept + 2 * boundary + labels)
    assert t.breakdown == {
        "variables": W * 2 * kept,
        "activations": W * 2 * boundary,
        "labels": W * labels,
    }


def test_ralp_over_two_ps_adds_the_ps_to_ps_hop(tiny):
    W = 1
    t = ralp_traffic(tiny, {"fc": 0, "fc2": 1}, workers=W, ps=2)
    kept_ps0, kept_ps1 = 40, 8  # round-robin over the kept variables only
    hop = 4 * 5 * BATCH  # fc output goes to ps1 and its gradient comes back
    boundary = 4 * 6 * BATCH
    labels = 4 * BATCH  # to ps1, which holds the output layer
    assert t.ps_links[0] == LinkBytes(kept_ps0 + boundary + hop, kept_ps0 + boundary + hop)
    assert t.ps_links[1] == LinkBytes(kept_ps1 + hop, kept_ps1 + hop + labels)
    assert t.total == 2 * (kept_ps0 + kept_ps1) + 2 * boundary + 2 * hop + labels


def test_no_gradient_flows_back_into_a_parameter_free_prefix():
    rows = (
        row(0, "in", "other", 0, 12),
        row(1, "pool", "pool", 0, 3, ("in",)),
        row(2, "fc", "fc", 10, 2, ("pool",)),
    )
    table = LayerTable("t", BATCH, rows, ("fc",), (("fc", "fc/kernel", 40),))
    t = placed_traffic(
        table, {"fc": 0}, [0], workers=1, ps=1, mode="ralp", label_bytes_per_sample=0
    )
    assert t.worker_link == LinkBytes(tx=4 * 3 * BATCH, rx=0)  # activations out, nothing back


def test_horovod_ring_allreduce():
    t = horovod_traffic(1000, workers=4)
    assert t.worker_link == LinkBytes(1500, 1500)  # 2 * S * (W - 1) / W each way
    assert t.total == 6000  # 2 * S * (W - 1)
    assert horovod_traffic(1000, workers=1).total == 0


def test_one_entry_point_per_mode_and_horovod_reduces_only_trainable_variables(tiny):
    assert mode_traffic(tiny, "ps", 3, 1) == ps_traffic(tiny, 3, 1)
    assert mode_traffic(tiny, "ralp", 3, 1, {"fc": 0, "fc2": 0}) == ralp_traffic(
        tiny, {"fc": 0, "fc2": 0}, 3, 1)
    assert mode_traffic(tiny, "ralp", 3, 1, {}) == ps_traffic(tiny, 3, 1)  # nothing offloaded
    S = 4 * (12 + 105 + 24)
    assert mode_traffic(tiny, "horovod", 4).worker_link == LinkBytes(2 * S * 3 // 4, 2 * S * 3 // 4)
    # a batch-norm-like row: its 8 moving statistics have no gradient, Horovod leaves them
    frozen = row(5, "bn", "norm", 8, 4, ("fc2",), trainable=False)
    table = tiny.__class__("t", BATCH, (*tiny.rows, frozen), ("bn",), tiny.variables)
    assert mode_traffic(table, "horovod", 4) == mode_traffic(tiny, "horovod", 4)
    with pytest.raises(ValueError, match="unknown mode 'dp'"):
        mode_traffic(tiny, "dp", 4)


def test_the_busiest_link_is_the_largest_one_way_load_of_any_link(tiny):
    S = 40 + 8 + 400 + 20 + 80 + 16
    assert ps_traffic(tiny, workers=3, ps=1).busiest_link_bytes == 3 * S  # the PS, each way
    # two PS tasks: the one holding variables 0, 2, 4 is the busier
    assert ps_traffic(tiny, workers=2, ps=2).busiest_link_bytes == 2 * (40 + 400 + 80)
    assert horovod_traffic(1000, workers=4).busiest_link_bytes == 1500
    lopsided = placed_traffic(tiny, {}, [0] * 6, workers=1, ps=1, mode="ps")
    assert lopsided.busiest_link_bytes == S and lopsided.to_dict()["busiest_link_bytes"] == S


def test_bad_cluster_sizes(tiny):
    with pytest.raises(ValueError, match="workers"):
        ps_traffic(tiny, workers=0, ps=1)
    with pytest.raises(ValueError, match="PS"):
        ps_traffic(tiny, workers=1, ps=0)


def test_round_robin_and_spread():
    assert round_robin(5, 2) == [0, 1, 0, 1, 0]
    # LPT: the biggest layer alone on one task, the rest on the other; free layers follow.
    got = spread_layers(["flat", "fc6", "drop", "fc7", "fc8"], [0, 400, 0, 70, 16], 2)
    assert got == {"flat": 0, "fc6": 0, "drop": 1, "fc7": 1, "fc8": 1}
    assert spread_layers(["a", "b"], [1, 1], 1) == {"a": 0, "b": 0}
    with pytest.raises(ValueError):
        spread_layers(["a"], [1], 0)
