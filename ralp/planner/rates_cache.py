"""The device probes' answers, kept per host so that ``ralp.wrap`` probes a device once.

:func:`ralp.planner.estimate.probe` (the FLOP rates) takes about half a second, a fifth of
``ralp.wrap``'s default decision on a large model; :func:`ralp.planner.loopback.probe_shared_host`
(what loopback transfers cost the CPUs, for a cluster whose tasks share this host) a few
seconds. Their answers depend on the device, not on the model: the CPU, the CPUs this process
may use and its CPU budget (a control group's quota), and the TensorFlow and Keras builds.
So they are kept in memory for the process and in small JSON files for later processes,
keyed by those facts, as autotuners keep their answers (cuDNN's and XLA's autotuning
caches). An entry older than :data:`MAX_AGE_S` is measured again: a shared machine drifts
from day to day.

The files are ``device_rates.json`` and ``shared_host.json`` in ``$RALP_CACHE_DIR`` (default
``$XDG_CACHE_HOME/ralp``, else ``~/.cache/ralp``). ``RALP_PROBE_CACHE=off`` probes every time
and keeps nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ralp.planner.estimate import DeviceRates, probe
from ralp.planner.topology import SharedCPU

MAX_AGE_S = 24 * 3600.0  # older rates are measured again
CACHE_FILE = "device_rates.json"
SHARED_HOST_FILE = "shared_host.json"
_THREAD_ENV = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS",
               "TF_ENABLE_ONEDNN_OPTS")
_in_process: dict[tuple[str, str], Any] = {}
Probed = TypeVar("Probed", DeviceRates, SharedCPU)


def device_rates(max_age_s: float = MAX_AGE_S) -> DeviceRates:
    """This device's rates: kept ones for the same device if younger than ``max_age_s``,
    else a fresh :func:`~ralp.planner.estimate.probe`, which is then kept."""
    return _kept(CACHE_FILE, DeviceRates, probe, max_age_s)


def shared_host(max_age_s: float = MAX_AGE_S) -> SharedCPU:
    """What loopback transfers and a training step cost this host's CPUs
    (:func:`ralp.planner.loopback.probe_shared_host`), kept as the rates are."""
    from ralp.planner.loopback import probe_shared_host

    return _kept(SHARED_HOST_FILE, SharedCPU, probe_shared_host, max_age_s)


def _kept(file: str, kind: type[Probed], measure: Callable[[], Probed],
          max_age_s: float) -> Probed:
    if os.environ.get("RALP_PROBE_CACHE", "on").lower() in ("off", "0", "no"):
        return measure()
    key = device_key()
    now = time.time()
    kept = _in_process.get((file, key)) or _read(cache_path(file), kind).get(key)
    if kept is not None and 0 <= now - kept.measured_at <= max_age_s:
        _in_process[(file, key)] = kept
        return dataclasses.replace(kept, cached=True)
    fresh = dataclasses.replace(measure(), measured_at=now)
    _in_process[(file, key)] = fresh
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs a probe
        _write(cache_path(file), key, fresh, kind)
    return fresh


def forget_in_process() -> None:
    """Drop what this process keeps in memory (the files stay): the next
    :func:`device_rates` or :func:`shared_host` reads the file or probes, as a new process
    would."""
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


def cache_path(file: str = CACHE_FILE) -> Path:
    root = os.environ.get("RALP_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "ralp")
    return Path(root) / file


def _read(path: Path, kind: type[Probed] = DeviceRates) -> dict[str, Probed]:
    try:
        entries = json.loads(path.read_text())
        return {key: kind(**fields) for key, fields in entries.items()}
    except (OSError, ValueError, TypeError, AttributeError):  # none yet, or not ours: probe
        return {}


def _write(path: Path, key: str, found: Probed, kind: type[Probed] = DeviceRates) -> None:
    entries = {k: dataclasses.asdict(v) for k, v in _read(path, kind).items()}
    entries[key] = dataclasses.asdict(dataclasses.replace(found, cached=False))
    path.parent.mkdir(parents=True, exist_ok=True)
    # another process may write at the same time: whole files replace each other
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
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
