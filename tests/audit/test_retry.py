"""The audit runs again, once, after a transport fault, and never after anything else."""

import pytest

from ralp.audit import step_audit
from ralp.audit.step_audit import AuditSettings, audit
from ralp.cluster.fresh_process import ChildError

FAULT = ChildError("InternalError: 2 root error(s) found.\n  (0) INTERNAL: Unable to parse request")


def _attempts(monkeypatch, outcomes):
    calls = []

    def fake(settings, timeout):
        calls.append(settings)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(step_audit, "_audit_on_new_cluster", fake)
    return calls


def test_a_transport_fault_is_audited_again_on_a_new_cluster(monkeypatch, capsys):
    calls = _attempts(monkeypatch, [FAULT, {"mode": "ps"}])
    assert audit(AuditSettings("alexnet", "ps")) == {"mode": "ps"}
    assert len(calls) == 2
    assert "transport fault" in capsys.readouterr().err


def test_a_second_transport_fault_is_raised(monkeypatch):
    calls = _attempts(monkeypatch, [FAULT, FAULT, {"mode": "ps"}])
    with pytest.raises(ChildError, match="Unable to parse request"):
        audit(AuditSettings("alexnet", "ps"))
    assert len(calls) == 2


def test_any_other_failure_is_raised_at_once(monkeypatch):
    calls = _attempts(monkeypatch, [ChildError("ValueError: a misplaced op"), {"mode": "ps"}])
    with pytest.raises(ChildError, match="misplaced"):
        audit(AuditSettings("alexnet", "ps"))
    assert len(calls) == 1
