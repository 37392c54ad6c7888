"""``ralp.bench.plots``: what the figure shows, read back from its bars, labels and legend."""

import matplotlib.colors as mcolors
import pytest

from ralp.bench.plots import MODE_COLORS, build_figure, plot
from ralp.bench.records import add_speedups
from tests.bench.records_fixtures import failed, local, record

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _bars(ax) -> list[dict]:
    """Every bar of a panel: its centre, height, mode (by colour) and hatch."""
    by_color = {mcolors.to_hex(c): mode for mode, c in MODE_COLORS.items()}
    out = []
    for patch in ax.patches:
        out.append({"x": patch.get_x() + patch.get_width() / 2, "height": patch.get_height(),
                    "mode": by_color.get(mcolors.to_hex(patch.get_facecolor())),
                    "hatch": patch.get_hatch()})
    return sorted(out, key=lambda b: b["x"])


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_throughput_panel_shows_each_modes_speedup_over_plain_ps(mixed):
    fig = build_figure(mixed)
    speed, _ = fig.axes[:2]
    bars = _bars(speed)
    ticks = [t.get_text() for t in speed.get_xticklabels()]
    assert ticks == ["vgg19\nN=4", "resnet50\nN=2", "resnet50\nN=4"]
    # one bar per successful (model, N, mode), as tall as its speedup over plain PS
    expected = sorted(r["speedup_vs_ps"] for r in mixed if r["speedup_vs_ps"] is not None)
    assert sorted(round(b["height"], 6) for b in bars) == [round(v, 6) for v in expected]
    heights = {b["mode"]: b["height"] for b in bars if b["x"] < 1}  # the vgg19 group
    assert heights == pytest.approx({"ps": 1.0, "ralp-h": 1.5, "ralp-n": 1.3})
    assert {"1.50", "1.30", "1.20"} <= set(_texts(speed))  # bar labels, ps' left out
    assert "no ps run" in _texts(speed)  # resnet50 at N=2 has no baseline
    assert "failed" in _texts(speed)  # vgg19's horovod run
    assert speed.get_title() == "(a) throughput vs plain PS"


def test_bytes_panel_is_logarithmic_and_hatches_what_was_not_measured(mixed):
    fig = build_figure(mixed)
    _, wire = fig.axes[:2]
    assert wire.get_yscale() == "log"
    bars = _bars(wire)
    hatched = [b for b in bars if b["hatch"]]
    assert [(b["mode"], b["height"]) for b in hatched] == [("ralp-n", 4.0e8)]  # predicted only
    measured = sorted(b["height"] for b in bars if not b["hatch"])
    assert measured == sorted([1.2e9, 3.0e8, 2.0e8, 1.5e8, 1.2e9])
    assert wire.get_title() == "(b) bytes per step: measured; hatched: predicted"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["ps", "ralp-h", "ralp-n", "horovod", "predicted (not measured)",
                      "predicted bytes"]
    assert fig.get_suptitle() == "ralp bench: backend netns, bandwidth 1gbit"


def test_the_callers_records_are_not_touched_and_a_png_is_written(tmp_path, mixed):
    before = [dict(r) for r in mixed]
    plot(mixed, str(tmp_path / "fig.png"))
    assert (tmp_path / "fig.png").read_bytes().startswith(PNG_MAGIC)
    assert mixed == before


def test_nothing_succeeded():
    fig = build_figure([failed()])
    assert fig.get_suptitle() == "ralp bench: no successful runs"
    assert all(_texts(ax) == ["no successful runs"] and not ax.axison for ax in fig.axes)


def test_unmeasured_bytes_are_all_predicted():
    fig = build_figure(add_speedups([local(), local(mode="ralp-h", images_per_sec=140.0)]))
    _, wire = fig.axes[:2]
    assert wire.get_title() == "(b) bytes per step: predicted (none measured)"
    assert all(b["hatch"] for b in _bars(wire))
    assert fig.get_suptitle() == "ralp bench: backend local, bandwidth unshaped"


def test_bandwidths_go_into_the_ticks_and_an_unknown_mode_gets_a_colour():
    records = add_speedups([record(), record(bandwidth="100mbit", images_per_sec=20.0),
                            record(mode="custom", images_per_sec=50.0)])
    fig = build_figure(records)
    speed, _ = fig.axes[:2]
    assert [t.get_text() for t in speed.get_xticklabels()] == ["vgg19\nN=4\n1gbit",
                                                               "vgg19\nN=4\n100mbit"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:2] == ["ps", "custom"]
    assert "bandwidths 1gbit, 100mbit" in fig.get_suptitle()


def test_consolidation_jobs_are_drawn_when_there_is_nothing_else():
    records = [record(job=0, scenario="all-ps"), record(job=1, scenario="all-ps", model="resnet50")]
    fig = build_figure(add_speedups(records))
    speed, _ = fig.axes[:2]
    assert [t.get_text() for t in speed.get_xticklabels()] == ["vgg19\nN=4", "resnet50\nN=4"]
    assert [b["height"] for b in _bars(speed)] == [1.0, 1.0]
