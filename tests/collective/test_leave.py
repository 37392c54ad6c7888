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


def _leave_with(store, monkeypatch, rank=1, workers=2):
    from ralp import _compat
    from ralp.collective import trainer

    for k in range(workers):  # the other workers are done
        store.keys.add(f"ralp/leave/done/{k}")
    monkeypatch.setattr(_compat, "coordination_key_values", lambda: (store.put, store.get))
    trainer.leave_together(rank, workers)


def test_a_last_worker_whose_leave_reply_is_lost_to_worker_0s_exit_leaves(monkeypatch):
    import tensorflow as tf

    store = _Store("ralp/leave/left/1", tf.errors.UnavailableError)
    _leave_with(store, monkeypatch)
    assert "ralp/leave/left/1" in store.keys


@pytest.mark.parametrize("closing", ["ralp/leave/done/1", "ralp/leave/left/1"])
def test_other_failures_on_leaving_are_raised(closing, monkeypatch):
    import tensorflow as tf

    error = (tf.errors.UnavailableError if closing.endswith("done/1")  # service gone early
             else tf.errors.InternalError)
    with pytest.raises(error):
        _leave_with(_Store(closing, error), monkeypatch)
