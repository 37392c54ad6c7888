"""Stanza's n_c / n_f search: the fastest split whose FC rank fits in memory."""

import pytest

from ralp.models import build_model
from ralp.planner.workload import Workload
from ralp.profiler.api import profile


def test_stanza_search_takes_the_fastest_split_that_fits_in_memory():
    from lab.planner.predict import predict_on, predict_stanza
    from lab.planner.ps_step import Compute, Host
    from ralp.planner.modes import PlannerError

    work = Workload(profile(build_model("vgg11", 1000, 64), 8))
    compute, host, bits = Compute(0.5, 0.2), Host(False), 10**9
    every = {f: predict_on(work, compute, host, "stanza", 8 - f, f, bits, 8) for f in range(1, 5)}
    best = predict_stanza(work, compute, host, 8, bits)
    assert best.images_per_sec == max(p.images_per_sec for p in every.values())
    assert (best.workers, best.ps) == (8 - best.ps, best.ps) and best.devices == 8
    # A budget that one FC rank serving 7 CONV ranks exceeds, but one serving 4 fits.
    budget = (work.fc_rank_bytes(4) + work.fc_rank_bytes(7)) // 2
    bounded = predict_stanza(work, compute, host, 8, bits, memory_bytes=budget)
    assert bounded.ps >= 2
    assert bounded.images_per_sec == max(p.images_per_sec for f, p in every.items() if f >= 2)
    with pytest.raises(PlannerError, match="no FC rank fits"):
        predict_stanza(work, compute, host, 8, bits, memory_bytes=1)
