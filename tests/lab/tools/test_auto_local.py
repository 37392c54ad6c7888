"""The lab's check of wrap's auto on a LocalCluster: each rule's choice on one prediction."""

from lab.tools.auto_local import rules

BYTES = {"ps": 100.0, "ralp": 50.0}


def test_the_rules_disagree_between_the_margin_and_the_tie_band():
    assert rules({"ps": 100.0, "ralp": 110.0}, BYTES) == {"wrap": "ralp", "tie_band": "ps"}
    assert rules({"ps": 100.0, "ralp": 130.0}, BYTES) == {"wrap": "ralp", "tie_band": "ralp"}
    assert rules({"ps": 100.0, "ralp": 101.0}, BYTES) == {"wrap": "ps", "tie_band": "ps"}
    # wrap's rule asks for fewer bytes too; nothing to offload: plain PS under both
    assert rules({"ps": 100.0, "ralp": 130.0}, {"ps": 100.0, "ralp": 99.0})["wrap"] == "ps"
    assert rules({"ps": 100.0}, {"ps": 100.0}) == {"wrap": "ps", "tie_band": "ps"}
