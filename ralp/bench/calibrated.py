"""``python -m ralp.bench --calibrate``: the planner's calibration of each workload, measured
just before its runs and kept in their records.

A record's compute bound is only as good as a calibration measured beside it. So each
workload (model, batch, image size, classes, and the devices' budget) is calibrated right
before its first run, once per bench, and every record carries that calibration. A maker of
the calibration command (below) whose attribute ``each_round`` is true is asked again before
the workload's first run in each round of ``--repeat``: on a host whose speed drifts (our
lab's shared machine) a calibration from an earlier round no longer describes the run.

The calibration runs as a command, in a process of its own: the bench's process keeps no
TensorFlow state (its Horovod driver forks ranks from a process that has only imported it).
By default it is ``python -m ralp.planner.calibrate_cli``: one device's compute, on budgeted
devices inside one device's budget. ``$RALP_BENCH_CALIBRATION`` names another command's
maker as ``module:attribute`` (the lab's calibration with the simulated cluster's probes),
called as :func:`calibration_command` is; a variable, as the device watcher is
(:mod:`ralp.emulation.watchers`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ralp._named import named_attribute
from ralp.bench.pace import dilated_link
from ralp.bench.runspec import SHARED_CPUS, RunSpec
from ralp.emulation.budget import default_share
from ralp.errors import RalpError

CALIBRATION_ENV = "RALP_BENCH_CALIBRATION"  # module:attribute of the command's maker
CALIBRATION_STEPS = 10  # timed steps of each of the whole model and its tail
CALIBRATION_TIMEOUT_S = 1800.0
CALIBRATION_STOP_S = 30.0  # a stopped calibration's time to clean up before it is killed


class CalibrationFailed(RalpError, RuntimeError):
    """The calibration command failed; its message says why (the runs go on uncalibrated)."""


def workload_key(run: RunSpec) -> tuple:
    # the default share depends on the devices on the host; CPUs asked by hand do not
    budget = (run.device_cpus, run.devices if default_share(run.device_cpus) else None)
    return (run.model, run.batch_size, run.image_size, run.num_classes, *budget)


def calibration_command(run: RunSpec, output: str, steps: int, earlier: Sequence[dict],
                        transfer_rate: str | None) -> list[str]:
    """The product's calibration of ``run``'s workload, ``steps`` timed steps, written to
    ``output``: one device's compute, inside its budget on budgeted devices. ``earlier``
    (calibrations of the same budget this bench took before) and ``transfer_rate`` (the
    simulated fabric's link rate) serve other makers."""
    where = ([] if run.device_cpus == SHARED_CPUS else
             ["--device-cpus", run.device_cpus, "--devices", str(run.devices)])
    return [sys.executable, "-m", "ralp.planner.calibrate_cli", *where,
            "--model", run.model, "--batch-size", str(run.batch_size),
            "--image-size", str(run.image_size), "--num-classes", str(run.num_classes),
            "--steps", str(steps), "--output", output]


def command_maker():
    """The calibration command's maker: ``$RALP_BENCH_CALIBRATION``'s, else
    :func:`calibration_command`."""
    return named_attribute(CALIBRATION_ENV, "calibration command") or calibration_command


def budget_key(run: RunSpec) -> tuple | None:
    """The devices' budget ``run`` calibrates on (None: shared CPUs)."""
    return None if run.device_cpus == SHARED_CPUS else (run.device_cpus, run.devices)


def calibrate_workload(run: RunSpec, earlier: Sequence[dict] = (),
                       transfer_rate: str | None = None) -> dict:
    """The calibration JSON of ``run``'s workload, measured now on this host by the
    calibration command (:func:`command_maker`), with when it was taken. ``earlier``: the
    calibrations of the same budget taken before in this bench."""
    make = command_maker()
    with tempfile.TemporaryDirectory(prefix="ralp-calibration-") as tmp:
        output = str(Path(tmp) / "calibration.json")
        started = time.time()
        returncode, stderr = _run_calibration(
            make(run, output, CALIBRATION_STEPS, list(earlier), transfer_rate), run.model)
        if returncode != 0:
            said = (stderr.strip().splitlines() or ["no message"])[-1]
            raise CalibrationFailed(f"calibrating {run.model} failed: {said}")
        calibration = json.loads(Path(output).read_text())
    return {**calibration, "measured_at": started, "seconds": round(time.time() - started, 1)}


def _run_calibration(command: list[str], model: str) -> tuple[int, str]:
    """Run the calibration command; (exit code, stderr). Interrupted, or past its time, it is
    stopped as Ctrl-C stops it (SIGTERM: it removes its devices' groups and stops its
    processes), and killed only if that takes over :data:`CALIBRATION_STOP_S`."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = process.communicate(timeout=CALIBRATION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CalibrationFailed(f"calibrating {model} took over "
                                f"{CALIBRATION_TIMEOUT_S:.0f} s") from None
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.communicate(timeout=CALIBRATION_STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
    return process.returncode, stderr


class Calibrations:
    """Each workload's calibration, measured on first asking (None where it failed);
    ``transfer_rate``: the simulated fabric's link rate (None: no fabric)."""

    def __init__(self, announce=print, transfer_rate: str | None = None):
        self._transfer_rate = transfer_rate
        self._each_round = bool(getattr(command_maker(), "each_round", False))
        self._taken: dict[tuple, dict | None] = {}
        self._by_budget: dict[tuple | None, list[dict]] = {}  # budget -> those taken on it
        self._announce = announce

    def for_run(self, run: RunSpec, round_index: int = 0,
                dilation: float | None = None) -> dict | None:
        """``run``'s workload's calibration in round ``round_index``, measured now if it has
        none yet (in this round, where the maker asks for one each round). ``dilation``: the
        run's links are slowed by it, and so is the fabric's rate the maker is given."""
        key = (*workload_key(run), round_index if self._each_round else 0)
        if key not in self._taken:
            earlier = self._by_budget.setdefault(budget_key(run), [])
            rate = self._transfer_rate
            if rate and dilation:
                rate = dilated_link(rate, None, dilation)[0]
            try:
                taken = calibrate_workload(run, earlier, rate)
                self._taken[key] = taken
                earlier.append(taken)
            except CalibrationFailed as e:
                self._announce(f"ralp.bench: {e}; its records go without a calibration")
                self._taken[key] = None
        return self._taken[key]
