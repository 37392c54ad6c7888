"""The FLOP-rate probe's answer, kept per host so that ``ralp.wrap`` probes a device once.

:func:`ralp.planner.estimate.probe` takes about half a second, a fifth of ``ralp.wrap``'s
default decision on a large model. Its answer depends on the device, not on the model: the
CPU, the CPUs this process may use and its CPU budget (a control group's quota), and the
TensorFlow and Keras builds. So the rates are kept in memory for the process and in a small
JSON file for later processes, keyed by those facts, as autotuners keep their answers (cuDNN's
and XLA's autotuning caches). An entry older than :data:`MAX_AGE_S` is measured again: a
shared machine drifts from day to day.

The file is ``$RALP_CACHE_DIR/device_rates.json`` (default ``$XDG_CACHE_HOME/ralp``, else
``~/.cache/ralp``). ``RALP_PROBE_CACHE=off`` probes every time and keeps nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

from ralp.planner.estimate import DeviceRates, probe

MAX_AGE_S = 24 * 3600.0  # older rates are measured again
CACHE_FILE = "device_rates.json"
_THREAD_ENV = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS",
               "TF_ENABLE_ONEDNN_OPTS")
_in_process: dict[str, DeviceRates] = {}


def device_rates(max_age_s: float = MAX_AGE_S) -> DeviceRates:
    """This device's rates: kept ones for the same device if younger than ``max_age_s``,
    else a fresh :func:`~ralp.planner.estimate.probe`, which is then kept."""
    if os.environ.get("RALP_PROBE_CACHE", "on").lower() in ("off", "0", "no"):
        return probe()
    key = device_key()
    now = time.time()
    kept = _in_process.get(key) or _read(cache_path()).get(key)
    if kept is not None and 0 <= now - kept.measured_at <= max_age_s:
        _in_process[key] = kept
        return dataclasses.replace(kept, cached=True)
    rates = dataclasses.replace(probe(), measured_at=now)
    _in_process[key] = rates
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs a probe
        _write(cache_path(), key, rates)
    return rates


def forget_in_process() -> None:
    """Drop the rates this process keeps in memory (the file stays): the next
    :func:`device_rates` reads the file or probes, as a new process would."""
    _in_process.clear()


def device_key() -> str:
    """A digest of what the rates depend on: CPU, usable CPUs, CPU budget, builds, threads."""
    import keras
    import tensorflow as tf

    facts = {
        "cpu": _cpu_model(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "cpu_budget": _cpu_budget(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "env": {k: os.environ.get(k) for k in _THREAD_ENV},
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def cache_path() -> Path:
    root = os.environ.get("RALP_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "ralp")
    return Path(root) / CACHE_FILE


def _read(path: Path) -> dict[str, DeviceRates]:
    try:
        entries = json.loads(path.read_text())
        return {key: DeviceRates(**fields) for key, fields in entries.items()}
    except (OSError, ValueError, TypeError, AttributeError):  # none yet, or not ours: probe
        return {}


def _write(path: Path, key: str, rates: DeviceRates) -> None:
    entries = {k: dataclasses.asdict(v) for k, v in _read(path).items()}
    entries[key] = dataclasses.asdict(dataclasses.replace(rates, cached=False))
    path.parent.mkdir(parents=True, exist_ok=True)
    # another process may write at the same time: whole files replace each other
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".device_rates-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(entries, f, indent=1)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    import platform

    return platform.processor() or platform.machine()


def _cpu_budget() -> str:
    """This process' CPU quota from its control group (v1 ``cpu``, else v2 ``cpu.max``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "unknown"
    unified = None
    for line in lines:
        _, controllers, group = line.split(":", 2)
        if controllers == "":
            unified = Path("/sys/fs/cgroup") / group.lstrip("/") / "cpu.max"
        elif "cpu" in controllers.split(","):
            base = Path("/sys/fs/cgroup/cpu") / group.lstrip("/")
            with contextlib.suppress(OSError):
                return " ".join((base / name).read_text().strip()
                                for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us"))
    if unified is not None:
        with contextlib.suppress(OSError):
            return unified.read_text().strip()
    return "unknown"
