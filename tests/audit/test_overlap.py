"""A rank's step timeline (ralp/audit/overlap.py) read back from trace events laid out as
tf.profiler writes them: each step a function run, its backward pass' kernels, and its
reductions' start and done events."""

import pytest

from ralp._compat import TraceEvent
from ralp.audit.overlap import median_figures, ring_spans, step_overlaps, wire_lead

ASYNC = "ExecutorState::ProcessAsync::"


def _step(step_id: str, t: float, first_done: float, overlapped: bool = True) -> list:
    """A step from t: forward 0.1 s, backward 0.1-0.5 s (logits then conv), den's sum launched
    at 0.1, each gradient's when its op ends (or, not overlapped, all at 0.5)."""
    def reduction(name, start, done):
        stats = {"name": name, "kernel_type": "HorovodAllreduce", "step_id": step_id}
        return [TraceEvent(f"{ASYNC}Start", "", t + start, 1e-5, stats),
                TraceEvent(f"{ASYNC}Done", "", t + done, 1e-6, stats)]

    events = [TraceEvent("FunctionRun", "", t, 0.0, {"id": step_id}),
              TraceEvent("net/conv/Conv2D:Conv2D", "Conv2D", t + 0.01, 0.05, {}),
              TraceEvent("gradient_tape/net/logits/MatMul:MatMul", "MatMul", t + 0.1, 0.1, {}),
              TraceEvent("gradient_tape/net/conv/Conv2DBackpropFilter:Conv2DBackpropFilter",
                         "Conv2DBackpropFilter", t + 0.3, 0.2, {}),
              *reduction("ralp_den", 0.1, 0.12),
              *reduction("ralp_grad_1", 0.2 if overlapped else 0.5, first_done),
              *reduction("ralp_grad_0", 0.5, 0.7),
              TraceEvent("ExecutorDoneCallback", "", t + 0.75, 0.0, {"id": step_id})]
    return events


def test_each_steps_reductions_against_its_backward_pass():
    events = [*_step("7", 10.0, 0.4), *_step("8", 11.0, 0.6, overlapped=False)]
    first, second = step_overlaps(events)
    assert first.backward == pytest.approx((0.1, 0.5))
    assert [r.name for r in first.reductions] == ["ralp_grad_1", "ralp_grad_0"]
    assert first.den.name == "ralp_den"
    assert first.lead_s == pytest.approx(0.3) and first.done_lead_s == pytest.approx(0.1)
    assert first.exposed_s == pytest.approx(0.2) and first.done_in_backward == 1
    assert first.seconds == pytest.approx(0.75)
    # a step whose sums wait for the end of the backward pass: nothing ahead of it
    assert second.lead_s == pytest.approx(0.0) and second.done_in_backward == 0
    assert median_figures([first, second])["lead_s"] == pytest.approx(0.15)


def test_steps_the_trace_cut_or_without_gradient_sums_are_left_out():
    events = _step("7", 10.0, 0.4)
    cut = [e for e in _step("8", 11.0, 0.4) if not (e.name.endswith("Done")
                                                  and e.stats["name"] == "ralp_grad_0")]
    other = [TraceEvent("FunctionRun", "", 12.0, 0.0, {"id": "9"}),
             TraceEvent(f"{ASYNC}Start", "", 12.1, 0.0,
                        {"name": "ralp_sums_1", "kernel_type": "HorovodAllreduce",
                         "step_id": "9"})]
    assert [s.step_id for s in step_overlaps(events + cut + other)] == ["7"]
    assert median_figures([]) == {"steps": 0}


def _horovod_timeline() -> list[dict]:
    """Two steps of two gradient allreduces as Horovod writes them (microseconds after its
    start, 1000 s after the epoch's): step 0 runs grad_1 on the wire 1.25-1.6 s and grad_0
    1.6-1.9 s (each after its negotiation), step 1 the same 2 s later. Another collective
    (``ralp_sums``) is not a gradient's."""
    names = {1: "ralp_grad_1", 2: "ralp_grad_0", 3: "ralp_sums_1"}
    events = [{"name": "process_name", "ph": "M", "pid": 0,
               "args": {"start_time_since_epoch_in_micros": 1000 * 10**6}}]
    events += [{"name": "process_name", "ph": "M", "pid": p, "args": {"name": n}}
               for p, n in names.items()]
    us = lambda t: round(t * 1e6)  # noqa: E731
    for step in range(2):
        t = 2.0 * step
        for pid, neg, op in ((1, (1.0, 1.2), (1.25, 1.6)), (2, (1.3, 1.5), (1.6, 1.9)),
                             (3, (0.5, 0.6), (0.6, 0.7))):
            events += [{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": us(t + neg[0]), "pid": pid},
                       {"ph": "X", "name": "1", "ts": us(t + neg[0]), "pid": pid, "dur": 0},
                       {"ph": "E", "ts": us(t + neg[1]), "pid": pid},
                       {"ph": "B", "name": "ALLREDUCE", "ts": us(t + op[0]), "pid": pid},
                       {"ph": "B", "name": "GLOO_ALLREDUCE", "ts": us(t + op[0]), "pid": pid},
                       {"ph": "E", "ts": us(t + op[1]), "pid": pid},
                       {"ph": "E", "ts": us(t + op[1]), "pid": pid}]
    return events


def test_horovods_rings_on_the_ranks_clock_against_a_steps_backward_pass():
    spans = ring_spans(_horovod_timeline())
    assert [t for span in spans for t in span[:2]] == pytest.approx(
        [1001.25, 1001.6, 1001.6, 1001.9, 1003.25, 1003.6, 1003.6, 1003.9])
    assert [span[2] for span in spans] == ["ralp_grad_1", "ralp_grad_0"] * 2
    # a rank's step from 1000.9 s (its trace's clock from 1000.0), backward 0.1-0.5 s into it
    [step] = step_overlaps(_step("7", 0.9, 0.6), origin=1000.0)
    assert step.start == pytest.approx(1000.9)
    assert wire_lead(step, spans) == pytest.approx(1001.4 - 1001.25)
    late = step_overlaps(_step("8", 10.0, 0.6), origin=1000.0)[0]
    assert wire_lead(late, spans) is None  # no allreduce began inside that step
    others = [(b, e, "ralp_stanza_head_0") for b, e, _ in spans]  # another process set's
    assert wire_lead(step, others) is None
