"""Fixtures shared by the test packages."""

import os
import shutil
import subprocess
import tempfile

import pytest


def pytest_sessionstart(session):
    """The tests keep ralp's per-host cache (the FLOP-rate probe's rates) in a directory of
    their own, removed at the end, never in the user's home."""
    os.environ["RALP_CACHE_DIR"] = tempfile.mkdtemp(prefix="ralp-test-cache-")


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(os.environ.pop("RALP_CACHE_DIR", ""), ignore_errors=True)


@pytest.fixture
def read_only_cgroup_root(tmp_path):
    """A directory laid out as a cgroup v1 root with a cpu controller, mounted read-only: a
    cgroup root that cannot be written, as for a user who is not root. Skipped where this
    process cannot make a read-only bind mount (not root)."""
    root = tmp_path / "cgroup"
    for controller, stat in (("cpu", "cpu.cfs_quota_us"), ("cpuacct", "cpuacct.usage")):
        (root / controller).mkdir(parents=True)
        (root / controller / stat).write_text("-1\n")
    bind = subprocess.run(["mount", "--bind", str(root), str(root)], capture_output=True, text=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here (not root?): {bind.stderr.strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(root)], capture_output=True,
                            text=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {ro.stderr.strip()}")
        assert not os.access(root / "cpu", os.W_OK) or _mkdir_fails(root / "cpu")
        yield str(root)
    finally:
        subprocess.run(["umount", str(root)], capture_output=True)


def _mkdir_fails(path) -> bool:
    try:
        os.mkdir(path / "probe")
    except OSError:
        return True
    os.rmdir(path / "probe")
    return False


# Test tiers. `pytest -m "not slow"` is the development tier (minutes on 2 cores); the README's
# test command and CI run everything. A test declares what it needs (tests/needs.py:
# ``needs_horovod``, ``needs_netns``, which mark it ``horovod`` or ``netns``; ``cluster`` for
# tests that start real server processes); those markers make it ``slow``. Tests slow for
# another reason say so themselves (``@pytest.mark.slow``).
_SLOW_BECAUSE = ("cluster", "netns", "horovod")


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        if any(item.get_closest_marker(m) for m in _SLOW_BECAUSE):
            item.add_marker(pytest.mark.slow)
