"""Throughput models (BRIEF §5) against hand-computed values."""

import pytest

from ralp.profiler import throughput_model as tm

WORK = tm.SplitWorkload(conv_time=0.2, fc_time=0.01, activation_bytes_per_sample=1000, batch=32,
                        conv_param_bytes=5e5)  # fmt: skip


def test_allreduce_rounds():
    assert [tm.allreduce_rounds(n) for n in (1, 2, 3, 4, 5, 8, 12, 16)] == [0, 1, 3, 2, 4, 3, 5, 4]


def test_ps_iteration():
    # 2 workers, 1 PS, 100 MB of parameters at 1 GB/s: 0.4 s of transfer + 0.1 s compute.
    t = tm.ps_iteration_time(2, 1, 100e6, 1e9, 0.1)
    assert t == pytest.approx(0.5)
    assert tm.throughput(2, 32, t) == pytest.approx(128.0)


def test_stanza_iteration():
    # n_c = 3, n_f = 1: compute 0.2 + 3 * 0.01; activations 2*3*1000*32/1e6; allreduce 5e5*3/1e6
    t = tm.stanza_iteration_time(3, 1, WORK, 1e6)
    assert t == pytest.approx(0.23 + 0.192 + 1.5)


def test_ralp_iteration():
    t = tm.ralp_iteration_time(4, WORK, 1e6)
    assert t == pytest.approx(0.2 + 0.04 + 2 * 4 * (32_000 + 5e5) / 1e6)


def test_best_assignment_is_the_exhaustive_optimum():
    work = tm.SplitWorkload(0.3, 0.05, 2e4, 32, 1e7)
    best = tm.best_stanza_assignment(8, work, 1.25e9)
    candidates = [
        tm.throughput(8 - f, 32, 0.3 + (8 - f) / f * 0.05 + 2 * (8 - f) * 2e4 * 32 / (f * 1.25e9)
                      + 1e7 * tm.allreduce_rounds(8 - f) / 1.25e9)
        for f in range(1, 8)
    ]  # fmt: skip
    assert best.throughput == pytest.approx(max(candidates))
    assert best.conv_workers + best.fc_workers == 8
    assert tm.best_stanza_assignment(8, work, 1.25e9, max_fc_workers=1).fc_workers == 1


def test_bad_inputs():
    with pytest.raises(ValueError):
        tm.ps_iteration_time(0, 1, 1, 1, 1)
    with pytest.raises(ValueError):
        tm.best_stanza_assignment(1, WORK, 1)
