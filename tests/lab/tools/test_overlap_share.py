"""The overlap term from step timelines (lab/tools/overlap_share.py) against hand counts."""

import json

import pytest

from lab.tools.overlap_share import measure, step_shares


def timeline(*steps: tuple[float, float, float | None, float]) -> dict:
    """One rank's steps: (backward start, backward end, wire lead, hand-over lead)."""
    return {"ranks": {"rank0": {"steps": [
        {"backward_s": [b0, b1], "wire_lead_s": wire, "lead_s": lead}
        for b0, b1, wire, lead in steps]}}}


def test_a_steps_share_is_its_lead_over_its_backward_pass_within_zero_and_one():
    steps = timeline((0.0, 2.0, 1.5, 2.0), (1.0, 2.0, -0.3, 0.9), (0.0, 1.0, 1.2, 1.0),
                     (0.0, 1.0, None, 0.5))
    # the wire's: 0.75, 0 (the bytes left after the backward pass), 1 (clipped); no wire: out
    assert step_shares(steps) == pytest.approx([0.75, 0.0, 1.0])
    assert step_shares(steps, "lead_s") == pytest.approx([1.0, 0.9, 1.0, 0.5])


def test_the_term_is_the_median_over_every_step_of_every_timeline(tmp_path):
    horovod, collective = tmp_path / "h.json", tmp_path / "c.json"
    horovod.write_text(json.dumps(timeline((0, 1, 0.2, 0.9), (0, 1, 0.4, 0.9))))
    collective.write_text(json.dumps(timeline((0, 1, None, 0.8))))
    result = measure([str(horovod)], (str(collective),))
    assert result["share"] == pytest.approx(0.4)  # of 0.2, 0.4 (wire) and 0.8 (hand-over)
    assert result["steps"] == 3
    assert result["runs"]["h"]["median"] == pytest.approx(0.3)
