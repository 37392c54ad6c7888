"""ralp.planner.loopback: which clusters share this host, and what its probe measures."""

import dataclasses
import json
import os

import pytest

from ralp.cluster.spec import ClusterSpec, local_spec
from ralp.planner import rates_cache
from ralp.planner.loopback import probe_shared_host, shares_this_host, usable_cores
from ralp.planner.rates_cache import SHARED_HOST_FILE, cache_path, device_key, shared_host


def test_a_local_cluster_shares_this_host_and_a_remote_one_does_not():
    assert shares_this_host(local_spec(2, 1))
    assert shares_this_host(ClusterSpec("localhost:2222", ("localhost:2223",), ("[::1]:2224",)))
    remote = ClusterSpec("10.0.0.5:2222", ("10.0.0.6:2222", "10.0.0.7:2222"), ("10.0.0.8:2222",))
    assert not shares_this_host(remote)
    mixed = ClusterSpec("127.0.0.1:2222", ("127.0.0.1:2223",), ("10.0.0.8:2222",))
    assert not shares_this_host(mixed)


def test_the_probe_measures_loopback_transfers_and_a_steps_cores():
    host = probe_shared_host()
    assert host.cores == usable_cores() <= len(os.sched_getaffinity(0))
    # gRPC over loopback costs a fraction of a nanosecond to tens of nanoseconds of CPU per
    # byte, both ends; a tensor beyond its bytes microseconds to a millisecond
    assert 5e-11 < host.cpu_s_per_byte < 5e-8
    assert 0 <= host.cpu_s_per_transfer < 5e-3
    assert host.bytes_per_s > 1e7
    assert 0.1 < host.step_cores <= host.cores * 1.5
    assert host.probe_s > 0


def test_the_probe_is_kept_beside_the_rates(tmp_path, monkeypatch):
    monkeypatch.setenv("RALP_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("RALP_PROBE_CACHE", raising=False)
    monkeypatch.setattr(rates_cache, "_in_process", {})
    first = shared_host()
    assert not first.cached and first.measured_at > 0
    rates_cache.forget_in_process()  # as a later process: from the file
    again = shared_host()
    assert again.cached and dataclasses.replace(again, cached=False) == first
    assert list(json.loads(cache_path(SHARED_HOST_FILE).read_text())) == [device_key()]
    assert not cache_path().exists()  # the FLOP rates' file is another


@pytest.mark.parametrize("bad", ["fast", "0gbit"])
def test_a_bad_rate_fails_before_anything_is_probed(bad, monkeypatch):
    from ralp.errors import RalpError
    from ralp.planner.auto import task_links

    monkeypatch.setattr(rates_cache, "shared_host", lambda: pytest.fail("probed"))
    with pytest.raises(RalpError, match="not a positive rate"):
        task_links(local_spec(2, 1), bad)


def test_a_bad_rate_is_refused_for_machines_of_their_own_too():
    from ralp.errors import RalpError
    from ralp.planner.auto import task_links

    remote = ClusterSpec("10.0.0.5:2222", ("10.0.0.6:2222",), ("10.0.0.8:2222",))
    with pytest.raises(RalpError, match="not a positive rate"):
        task_links(remote, "fast")
    assert task_links(remote, None).words == "10gbit (assumed: pass bandwidth=)"
    assert task_links(remote, "1gbit").words == "1gbit"
