"""leave_together's exit protocol against a stand-in coordination store (no cluster)."""

from __future__ import annotations

import pytest


class _Store:
    """The coordination service's store as leave_together sees it: worker 0 has left (its
    service closed) once the insert of ``closing`` reached it, before the reply came back."""

    def __init__(self, closing: str, error: type[Exception]):
        self.keys: set[str] = set()
        self.closing, self.error = closing, error

    def put(self, key: str, value: str) -> None:
        self.keys.add(key)
        if key == self.closing:
            raise self.error(None, None, "Socket closed")

    def get(self, key: str) -> str:
        assert key in self.keys, f"{key} would block forever"
        return "1"


def _leave_with(store, monkeypatch):
    """Worker 1 of 2 leaves, the other worker done."""
    from ralp import _compat
    from ralp.collective import runtime

    store.keys.update({"ralp/leave/done/0", "ralp/leave/done/1"})
    monkeypatch.setattr(_compat, "coordination_key_values", lambda: (store.put, store.get))
    runtime.leave_together(1, 2)


def test_a_last_worker_whose_leave_reply_is_lost_to_worker_0s_exit_leaves(monkeypatch):
    import tensorflow as tf

    store = _Store("ralp/leave/left/1", tf.errors.UnavailableError)
    _leave_with(store, monkeypatch)
    assert "ralp/leave/left/1" in store.keys


@pytest.mark.parametrize("closing, error_name", [
    ("ralp/leave/done/1", "UnavailableError"),  # the service gone before the work was done
    ("ralp/leave/left/1", "InternalError"),
])
def test_other_failures_on_leaving_are_raised(closing, error_name, monkeypatch):
    import tensorflow as tf

    error = getattr(tf.errors, error_name)
    with pytest.raises(error):
        _leave_with(_Store(closing, error), monkeypatch)
