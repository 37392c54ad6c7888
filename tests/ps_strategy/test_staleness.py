"""Synchronization logic on scripted push sequences: policies, the DSSP controller, the server's
bound, waiting times (DSSP; Zhao et al. 2019)."""

import random

import numpy as np
import pytest

from ralp.ps_strategy.staleness import (
    DSSPController,
    SyncError,
    SyncPolicy,
    SyncServer,
    simulate,
)

W, K = 4, 60
HOMOGENEOUS = [[1.0] * K for _ in range(W)]
ONE_2X_SLOW = [[1.0] * K for _ in range(W - 1)] + [[2.0] * K]


def bursty(seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.choice([0.5, 0.5, 0.5, 3.0]) for _ in range(K)] for _ in range(W)]


POLICIES = ["bsp", "asp", "ssp:0", "ssp:3", "ssp:15", "dssp:3:15", "dssp:0:4", "dssp:5:5"]


# ------------------------------------------------------------------ policies


@pytest.mark.parametrize(
    ("text", "expected", "bound"),
    [
        ("bsp", SyncPolicy("bsp"), 0),
        ("ASP", SyncPolicy("asp"), None),
        ("ssp:3", SyncPolicy("ssp", 3), 3),
        ("dssp:3:15", SyncPolicy("dssp", 3, 15), 15),
        ("dssp-paper:3:15", SyncPolicy("dssp-paper", 3, 15), None),  # as published: no cap
    ],
)
def test_parse(text, expected, bound):
    policy = SyncPolicy.parse(text)
    assert policy == expected and policy.bound == bound


def test_parse_with_a_separate_staleness():
    assert SyncPolicy.parse("ssp", staleness=4) == SyncPolicy("ssp", 4)
    assert SyncPolicy.parse("dssp", staleness=(3, 15)) == SyncPolicy("dssp", 3, 15)
    assert str(SyncPolicy.parse("dssp", staleness=(3, 15))) == "dssp(3,15)"
    literal = SyncPolicy.parse("dssp-paper", staleness=(3, 15))
    assert (literal.spec, str(literal)) == ("dssp-paper:3:15", "dssp-paper(3,15)")
    assert SyncPolicy.parse(literal.spec) == literal


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ("sync", {}, "use bsp, asp"),
        ("ssp", {}, "needs its bound"),
        ("ssp:1:2", {}, "one staleness bound"),
        ("dssp:3", {}, "needs its range"),
        ("dssp:9:3", {}, "s_L <= s_U"),
        ("dssp-paper:2", {}, "dssp-paper needs its range"),
        ("bsp:2", {}, "takes no staleness"),
        ("asp", {"staleness": 3}, "takes no staleness"),
    ],
)
def test_bad_policies_say_what_to_write(text, kwargs, message):
    with pytest.raises(SyncError, match=message):
        SyncPolicy.parse(text, **kwargs)


# ------------------------------------------------------------------ the controller


def test_controller_needs_two_pushes_of_both_workers():
    c = DSSPController(2, r_max=12)
    c.record_push(0, 1.0)
    c.record_push(1, 2.0)
    assert c.extra_iterations(0, 1, 2.0) == 0
    assert c.decisions == [(2.0, 0, 0)]


def test_controller_homogeneous_workers_get_one_more_iteration():
    # Same interval 1.0; the fastest pushed 0.1 s after the slowest: one more iteration ends
    # 0.1 s after the slowest's next push -- the closest meeting point.
    c = DSSPController(2, r_max=12)
    for t in (0.0, 1.0):
        c.record_push(1, t)
        c.record_push(0, t + 0.1)
    assert c.extra_iterations(0, 1, 1.1) == 1


def _pushes(controller, times_by_worker):
    """Report each worker's pushes to the controller, in time order."""
    events = sorted((t, w) for w, times in times_by_worker.items() for t in times)
    for t, w in events:
        controller.record_push(w, t)


def _closest_meeting(fast, slow, r_max):
    """DSSP's controller (Zhao et al. 2019) by numpy: the r in 0..r_max whose simulated push
    of the fastest is nearest to
    any of the slowest's next r_max + 1 pushes (ties: the smallest r)."""
    a_p, i_p = fast[-1], fast[-1] - fast[-2]
    a_s, i_s = slow[-1], slow[-1] - slow[-2]
    mine = a_p + np.arange(r_max + 1) * i_p
    theirs = a_s + i_s + np.arange(r_max + 1) * i_s
    distance = np.abs(mine[:, None] - theirs[None, :]).min(axis=1)
    return int(np.argmin(np.round(distance, 9)))


@pytest.mark.parametrize(
    "fast, slow, expected",
    [
        # Fast every 1.0 (last 10.0); slow every 2.0 (last 9.5: next 11.5, 13.5, ...): fast
        # pushes are 0.5 from a slow one at best, r = 1 (11.0 vs 11.5) is the first.
        ([9.0, 10.0], [7.5, 9.5], 1),
        # Slow last at 9.9 (next 11.9, 13.9): r = 2 (12.0) is 0.1 away, the first that close.
        ([9.0, 10.0], [7.9, 9.9], 2),
        # Same speed, the slow one 0.1 s later: the fast one's next push meets it.
        ([0.1, 1.1], [0.0, 1.0], 1),
    ],
)
def test_controller_grants_the_iterations_that_meet_the_slowest_soonest(fast, slow, expected):
    c = DSSPController(2, r_max=12)
    _pushes(c, {0: fast, 1: slow})
    assert c.extra_iterations(0, 1, fast[-1]) == expected == _closest_meeting(fast, slow, 12)
    assert c.decisions == [(fast[-1], 0, expected)]


def test_controller_keeps_only_the_last_two_pushes():
    c = DSSPController(2, r_max=12)
    _pushes(c, {0: [1.0, 5.0, 9.0, 10.0], 1: [0.0, 3.0, 7.5, 9.5]})  # older pushes forgotten
    assert c.interval(0) == 1.0 and c.interval(1) == 2.0
    assert c.extra_iterations(0, 1, 10.0) == _closest_meeting([9.0, 10.0], [7.5, 9.5], 12) == 1


def test_controller_never_exceeds_r_max():
    c = DSSPController(2, r_max=3)
    _pushes(c, {0: [0.0, 1.0], 1: [0.0, 100.0]})  # the slowest's next push is far away
    assert c.extra_iterations(0, 1, 100.0) == 3 == _closest_meeting([0.0, 1.0], [0.0, 100.0], 3)


# ------------------------------------------------------------------ DSSP as published


ONE_3X_SLOW = [[1.0] * 60, [3.0] * 20]


@pytest.mark.parametrize("script", [ONE_3X_SLOW, ONE_2X_SLOW, bursty(2)], ids=["3x", "2x", "b2"])
@pytest.mark.parametrize(("low", "high"), [(1, 3), (3, 15), (0, 4)])
def test_capped_dssp_never_passes_s_u(script, low, high):
    record = simulate(SyncPolicy("dssp", low, high), script)
    assert max(gap for *_, gap in record.starts) <= high


def test_the_literal_dssp_runs_past_s_u_where_the_capped_one_stops():
    capped = simulate(SyncPolicy.parse("dssp:1:3"), ONE_3X_SLOW)
    literal = simulate(SyncPolicy.parse("dssp-paper:1:3"), ONE_3X_SLOW)
    assert capped.max_gap <= 3 < literal.max_gap
    # each grant is at most r_max = 2 iterations: the gap grows by asking again and again
    assert literal.decisions and all(r <= 2 for _, _, r in literal.decisions)
    assert sum(r > 0 for _, _, r in literal.decisions) > literal.max_gap // 3
    assert sum(literal.waiting_s) < sum(capped.waiting_s)  # it waits (much) less
    assert literal.clocks == [60, 20]  # the fast worker never waited for the end


def test_the_push_that_asks_passes_on_top_of_the_grant():
    # Worker 0 pushes every 1 s; worker 1 every 2 s, half a second out of step, so the
    # controller grants extra iterations. Capped DSSP counts the push that asked as the first
    # granted iteration; as published, that push passes on top of the r granted, so the
    # fastest asks again one push later.
    script = [[1.0] * 30, [1.5] + [2.0] * 14]
    for spec, pushes_until_next_ask in (("dssp:1:13", 0), ("dssp-paper:1:13", 1)):
        record = simulate(SyncPolicy.parse(spec), script)
        t0, worker, r = next(d for d in record.decisions if d[2] > 0)
        next_ask = next(t for t, w, _ in record.decisions if w == worker and t > t0)
        assert next_ask - t0 == pytest.approx(r + pushes_until_next_ask), spec  # 1 s a push


# ------------------------------------------------------------------ the server and its bound


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(
    "script", [HOMOGENEOUS, ONE_2X_SLOW, bursty(0), bursty(1)], ids=["homo", "2x", "b0", "b1"]
)
def test_the_bound_is_never_exceeded_and_every_iteration_runs(policy, script):
    p = SyncPolicy.parse(policy)
    record = simulate(p, script)
    assert record.clocks == [len(times) for times in script]
    gaps = [gap for _, _, _, gap in record.starts]
    if p.bound is not None:
        assert max(gaps) <= p.bound
    assert record.max_gap == max(gaps)
    # every recorded start is consistent with the clocks at that time: gap <= clock
    assert all(0 <= gap <= clock for _, _, clock, gap in record.starts)


def test_bsp_holds_every_worker_until_the_round_is_complete():
    record = simulate(SyncPolicy("bsp"), ONE_2X_SLOW)
    assert record.max_gap == 0
    # each fast worker waits 1 s per round for the slow one (the last round's wait is over
    # when it has pushed its last gradient)
    assert record.waiting_s[:3] == [pytest.approx(K - 1)] * 3 and record.waiting_s[3] == 0
    starts = [(t, w) for t, w, _, _ in record.starts]
    assert starts[:W] == [(0.0, w) for w in range(W)]
    assert sorted(starts[W : 2 * W]) == [(2.0, w) for w in range(W)]


def test_asp_never_waits_and_drifts_apart():
    record = simulate(SyncPolicy("asp"), ONE_2X_SLOW)
    assert record.waiting_s == [0.0] * W and record.holds == []
    assert record.max_gap == K // 2  # the fast workers finish when the slow one is half way


def test_ssp_lets_the_fast_workers_run_s_ahead():
    for s in (3, 15):
        record = simulate(SyncPolicy("ssp", s), ONE_2X_SLOW)
        assert record.max_gap == s
        # rate-bound by the slow worker: every fast worker waits about (K - 2 s) x 1 s
        for w in range(3):
            assert record.waiting_s[w] == pytest.approx(K - 2 * s, abs=1.0)


def test_homogeneous_workers_never_wait_under_a_staleness_bound():
    for policy in ("ssp:3", "dssp:3:15"):
        assert sum(simulate(SyncPolicy.parse(policy), HOMOGENEOUS).waiting_s) == 0


@pytest.mark.parametrize("s_l", [1, 3, 5])
def test_dssp_waits_no_more_than_ssp_at_its_lower_bound_with_a_2x_slow_worker(s_l):
    dssp = simulate(SyncPolicy("dssp", s_l, 15), ONE_2X_SLOW)
    ssp = simulate(SyncPolicy("ssp", s_l), ONE_2X_SLOW)
    assert sum(dssp.waiting_s) <= sum(ssp.waiting_s)
    assert dssp.decisions, "the fastest worker asked the controller"
    assert dssp.max_gap <= 15


@pytest.mark.parametrize("seed", range(5))
def test_dssp_waits_no_more_than_ssp_at_its_lower_bound_when_bursty(seed):
    dssp = simulate(SyncPolicy("dssp", 3, 15), bursty(seed))
    ssp = simulate(SyncPolicy("ssp", 3), bursty(seed))
    assert sum(dssp.waiting_s) <= sum(ssp.waiting_s) + 1e-9


def test_server_rejects_a_push_from_a_held_worker():
    server = SyncServer(SyncPolicy("bsp"), 2)
    server.start(0), server.start(1)
    assert server.push(0, 1.0) == []  # held: worker 1 has not pushed
    with pytest.raises(SyncError, match="pushed while held"):
        server.push(0, 1.5)
    assert server.push(1, 2.0) == [1, 0]  # the round is complete: both go
    assert server.record.waiting_s == [1.0, 0.0]
    assert server.record.to_dict()["total_waiting_s"] == 1.0
