"""ralp.planner.rates_cache: the FLOP-rate probe's answer kept per device."""

import dataclasses
import json

import pytest

from ralp.planner import rates_cache
from ralp.planner.rates_cache import cache_path, device_key, device_rates


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RALP_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("RALP_PROBE_CACHE", raising=False)
    monkeypatch.setattr(rates_cache, "_in_process", {})
    return tmp_path


def test_the_first_call_probes_and_keeps_what_later_calls_and_processes_get(cache_dir):
    first = device_rates()
    assert not first.cached and first.probe_s > 0 and first.measured_at > 0
    again = device_rates()  # the same process
    assert again.cached and dataclasses.replace(again, cached=False) == first
    rates_cache.forget_in_process()  # as a later process: from the file
    from_file = device_rates()
    assert from_file.cached and dataclasses.replace(from_file, cached=False) == first
    entries = json.loads(cache_path().read_text())
    assert list(entries) == [device_key()] and not entries[device_key()]["cached"]


def test_rates_older_than_the_limit_are_measured_again(cache_dir):
    first = device_rates()
    fresh = device_rates(max_age_s=0.0)
    assert not fresh.cached and fresh.measured_at > first.measured_at
    assert json.loads(cache_path().read_text())[device_key()]["measured_at"] == fresh.measured_at


def test_off_probes_every_time_and_keeps_nothing(cache_dir, monkeypatch):
    monkeypatch.setenv("RALP_PROBE_CACHE", "off")
    assert not device_rates().cached and not device_rates().cached
    assert not cache_path().exists()


def test_a_damaged_or_unwritable_cache_costs_only_a_probe(cache_dir, monkeypatch):
    cache_path().write_text("{not json")
    assert not device_rates().cached
    assert device_key() in json.loads(cache_path().read_text())  # written anew
    rates_cache.forget_in_process()
    monkeypatch.setenv("RALP_CACHE_DIR", "/proc/no-such-dir-can-be-made")
    assert not device_rates().cached


def test_the_key_changes_with_what_the_rates_depend_on(monkeypatch):
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    plain = device_key()
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "1")
    assert device_key() != plain
    monkeypatch.setattr(rates_cache, "_cpu_budget", lambda: "42500 100000")
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS")
    assert device_key() != plain
