"""What a test needs beyond Python, declared where the test is: each ``needs_*`` both marks
the test (``horovod``, ``netns``; tests/conftest.py makes those ``slow``) and skips it, with
the reason, where this machine lacks the need. ``*_MARKS`` are the same for
``pytest.param(..., marks=...)``."""

import pytest

from ralp.emulation.iproute import netns_unavailable_reason
from ralp.horovod.launch import horovod_unavailable_reason

HOROVOD = horovod_unavailable_reason()
NETNS = netns_unavailable_reason()

HOROVOD_MARKS = (pytest.mark.horovod,
                 pytest.mark.skipif(HOROVOD is not None, reason=f"Horovod unavailable: {HOROVOD}"))
NETNS_MARKS = (pytest.mark.netns,
               pytest.mark.skipif(NETNS is not None, reason=f"netns backend unavailable: {NETNS}"))


def _marked(marks):
    def apply(test):
        for mark in reversed(marks):
            test = mark(test)
        return test
    return apply


needs_horovod = _marked(HOROVOD_MARKS)
needs_netns = _marked(NETNS_MARKS)
