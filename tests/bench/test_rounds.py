"""Interleaved repeats: the rotated order, and each setting's medians over its rounds."""

import pytest

from ralp.bench.records import add_speedups
from ralp.bench.report import to_table
from ralp.bench.rounds import numbered_as_rounds, repeated, spread, summarize
from ralp.bench.runner import rounds
from tests.bench.records_fixtures import failed, record


def test_each_round_rotates_the_order_by_one():
    assert [x for _, x in rounds("ABCD", 3)] == list("ABCD" "BCDA" "CDAB")
    assert [r for r, _ in rounds("AB", 2)] == [0, 0, 1, 1]
    assert rounds("AB", 1) == [(0, "A"), (0, "B")]
    with pytest.raises(ValueError):
        rounds("AB", 0)


def _scripted() -> list[dict]:
    """Three rounds of ps and ralp-n; round 1's machine was slow for both."""
    rates = {"ps": [10.0, 5.0, 12.0], "ralp-n": [40.0, 22.0, 36.0]}
    return add_speedups([record(mode=mode, round=k, images_per_sec=rates[mode][k],
                                step_time_s=1.0 + k)
                         for k in range(3) for mode in ("ps", "ralp-n")])


def test_a_setting_gets_its_median_and_range_and_ratios_their_per_round_median():
    summaries = summarize(_scripted())
    assert [s["mode"] for s in summaries] == ["ps", "ralp-n"]
    ps, ralp = summaries
    assert ps["rounds"] == ralp["rounds"] == 3
    assert ralp["images_per_sec"] == 36.0  # median of 40, 22, 36
    assert ralp["images_per_sec_spread"]["min"] == 22.0
    assert ralp["images_per_sec_spread"]["max"] == 40.0
    # per-round ratios 4.0, 4.4, 3.0: their median, not 36 / 10 (the ratio of medians)
    assert ralp["speedup_vs_ps"] == pytest.approx(4.0)
    assert ralp["speedup_vs_ps_spread"]["min"] == pytest.approx(3.0)
    assert ralp["speedup_vs_ps_spread"]["max"] == pytest.approx(4.4)
    assert ralp["speedup_vs_ps_spread"]["max_deviation"] == pytest.approx(0.25)
    assert ps["step_time_s"] == 2.0  # medians of the other figures


def test_a_failed_or_flagged_round_is_counted_not_averaged():
    rows = _scripted()
    rows[3] = failed(mode="ralp-n", round=1)
    rows[5]["host_kept_up"] = False
    ralp = summarize(add_speedups(rows))[1]
    assert ralp["rounds"] == 3 and ralp["failed"] == 1 and ralp["flagged"] == 1
    assert ralp["images_per_sec"] == 38.0  # median of the two that ran
    table = to_table(add_speedups(rows))
    assert "ralp-n ! (1/3 failed)" in table
    assert "could not keep up" in table


def test_the_table_gives_medians_with_their_range():
    table = to_table(_scripted())
    assert "36.0 [22.0-40.0]" in table
    assert "4.00 [3.00-4.40]" in table
    assert "medians over 3 rounds" in table


def test_one_round_is_not_summarised():
    assert not repeated([record(), record(mode="ralp-n")])
    assert repeated(_scripted())
    assert spread([]) is None
    assert spread([2.0]) == {"median": 2.0, "min": 2.0, "max": 2.0, "max_deviation": 0.0}


def test_files_made_apart_number_each_settings_records_as_its_rounds():
    # one bench run per round and shape, files in the order given: one worker, then two
    files = [[record(mode=m, workers=w, round=0, images_per_sec=float(10 * w + k))
              for m in ("ps", "ralp-h")] for w in (1, 2) for k in range(3)]
    given = [r for f in files for r in f]
    numbered = numbered_as_rounds(given)
    got = {(r["mode"], r["workers"], r["images_per_sec"]): r["round"] for r in numbered}
    assert got == {(m, w, float(10 * w + k)): k for m in ("ps", "ralp-h") for w in (1, 2)
                   for k in range(3)}
    assert all(r["round"] == 0 for r in given)  # the records given are left as they were
    summaries = summarize(numbered)
    assert [s["rounds"] for s in summaries] == [3, 3, 3, 3]
    assert summaries[0]["images_per_sec"] == 11.0
