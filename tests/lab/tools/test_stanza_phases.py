"""A Stanza step's phases read back from a Horovod timeline built from known phase times."""

import json

import pytest

from lab.tools.stanza_phases import (
    PHASES,
    TimelineError,
    median_phases,
    read_events,
    stanza_phases,
)
from ralp.horovod.stanza import ACTIVATIONS, GRADIENTS, LABELS

HEAD, EARLY = "ralp_stanza_head_1", "ralp_stanza_head_0"  # the last gradient; an earlier one


def _timeline(durations: list[dict[str, float]]) -> list[dict]:
    """Horovod's events for consecutive steps with the given phase times (seconds), laid out
    as Horovod writes them: per collective a process, NEGOTIATE and operation spans in
    microseconds, sub-activities nested inside the operation."""
    pids = {name: k + 1 for k, name in enumerate((LABELS, ACTIVATIONS, GRADIENTS, HEAD, EARLY))}
    events = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}
              for name, pid in pids.items()]

    def span(name, kind, begin, end, nested=False):
        us = lambda t: round(t * 1e6)  # noqa: E731
        events.append({"ph": "B", "name": kind, "ts": us(begin), "pid": pids[name]})
        if nested:
            events.append({"ph": "B", "name": "GLOO_ALLREDUCE", "ts": us(begin), "pid": pids[name]})
            events.append({"ph": "E", "ts": us(end), "pid": pids[name]})
        events.append({"ph": "E", "ts": us(end), "pid": pids[name]})

    t = 1.0
    for d in durations:
        t += d["heads_forward"]  # the last CONV rank is ready to send
        span(ACTIVATIONS, "NEGOTIATE_ALLTOALL", t - 0.5 * d["heads_forward"], t)
        span(LABELS, "NEGOTIATE_ALLTOALL", t - 0.5 * d["heads_forward"], t)
        span(LABELS, "ALLTOALL", t, t + 0.5 * d["exchange_in"])
        t += d["exchange_in"]
        span(ACTIVATIONS, "ALLTOALL", t - 0.8 * d["exchange_in"], t)
        span(GRADIENTS, "NEGOTIATE_ALLTOALL", t - 0.001, t + d["tail"])
        t += d["tail"]
        span(GRADIENTS, "ALLTOALL", t, t + d["exchange_out"])
        t += d["exchange_out"]
        span(HEAD, "NEGOTIATE_ALLREDUCE", t + 0.3 * d["heads_backward"], t + d["heads_backward"])
        # a gradient the backward pass made earlier: its ring runs during the backward pass
        span(EARLY, "NEGOTIATE_ALLREDUCE", t + 0.1 * d["heads_backward"],
             t + 0.2 * d["heads_backward"])
        span(EARLY, "ALLREDUCE", t + 0.2 * d["heads_backward"], t + 0.9 * d["heads_backward"],
             nested=True)
        t += d["heads_backward"]
        span(HEAD, "ALLREDUCE", t, t + d["ring"], nested=True)
        t += d["ring"]
    return events


def _steps(n):
    return [{"heads_forward": 0.05 + 0.01 * i, "exchange_in": 0.008, "tail": 0.27 - 0.01 * i,
             "exchange_out": 0.01, "heads_backward": 0.14, "ring": 0.04 + 0.002 * i}
            for i in range(n)]


def test_every_inner_steps_phases_come_back():
    steps = _steps(6)
    rows = stanza_phases(_timeline(steps))
    assert len(rows) == 4  # the first and the last are cut
    for row, want in zip(rows, steps[1:-1], strict=True):
        for phase in PHASES:
            assert getattr(row, phase) == pytest.approx(want[phase], abs=2e-6)
    # the step runs from one exchange in to the next: the next step's heads' forward in it
    assert rows[0].step == pytest.approx(
        sum(steps[1][p] for p in PHASES if p not in ("heads_forward", "exchange_in"))
        + steps[2]["heads_forward"] + steps[2]["exchange_in"], abs=2e-6)
    medians = median_phases(rows)
    assert medians["tail"] == pytest.approx((0.25 + 0.24) / 2, abs=2e-6)


def test_an_open_timeline_is_read(tmp_path):
    # Horovod leaves the array open (and a comma after the last event) until it shuts down
    events = _timeline(_steps(4))
    path = tmp_path / "timeline.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in events) + ",\n")
    assert read_events(path) == events
    assert len(stanza_phases(read_events(path))) == 2


def test_a_timeline_without_stanza_says_what_it_holds():
    events = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "HorovodAllreduce_x"}},
              {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 1, "pid": 1},
              {"ph": "E", "ts": 2, "pid": 1}]
    with pytest.raises(TimelineError, match="HorovodAllreduce_x"):
        stanza_phases(events)
    with pytest.raises(TimelineError, match="at least 3"):
        stanza_phases(_timeline(_steps(2)))
