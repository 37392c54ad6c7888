"""The lab's check of wrap's auto on a LocalCluster: the choice under each decision margin."""

from lab.tools.auto_local import rules

BYTES = {"ps": 100.0, "ralp": 50.0}


def test_each_margin_chooses_on_the_same_prediction():
    assert rules({"ps": 100.0, "ralp": 110.0}, BYTES) == {
        "margin 2%": "ralp", "margin 5%": "ralp", "margin 15%": "ps"}
    assert rules({"ps": 100.0, "ralp": 104.0}, BYTES)["margin 5%"] == "ps"
    assert set(rules({"ps": 100.0, "ralp": 130.0}, BYTES).values()) == {"ralp"}
    # too few bytes saved, or nothing to offload: plain PS under every margin
    assert set(rules({"ps": 100.0, "ralp": 130.0}, {"ps": 100.0, "ralp": 99.0}).values()) == {"ps"}
    assert set(rules({"ps": 100.0}, {"ps": 100.0}).values()) == {"ps"}
