"""``python -m ralp.bench --calibrate``: the planner's calibration of each workload, measured
just before its runs and kept in their records.

On this shared machine the same run measured on different days differs up to 3x (vgg11 plain
PS at N = 4, 10 Gbit/s: 19.5, 11.3, 6.5 and 10.0 images/s in four recorded sweeps), and so do
calibrations taken at different times. A prediction checked against a run is only a check of
the planner's model when its inputs were measured beside the run. So each workload (model,
batch, image size, classes, and the devices' budget) is calibrated right before its first run
in each round of ``--repeat``, and every record carries its round's calibration: ``python -m
lab.planner --validate`` predicts such a record from its own calibration. Once per bench was
not enough: resnet50's whole step measured 1.33 s and, three hours later, 1.01 s on the same
budget, more than the model's error.

- On budgeted devices, as ``python -m ralp.planner.calibrate_cli --device-cpus CPUS --devices N``
  does: the whole model's, the tail's and the head's step on one device inside the same
  budget, the CPU cost of a transfer and of a ring's byte, and each ring's overlap of wire
  and CPU (measured for the first workload of a budget; the later ones take it from that
  calibration with ``--overlap-from``).
- On shared CPUs (``--device-cpus shared``), as ``--shared-host`` does: the same
  steps in one process, and the host's capacity for processes that share it.

The calibration runs as that command, in a process of its own: the bench's process keeps no
TensorFlow state (its Horovod driver forks ranks from a process that has only imported it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ralp.bench.runspec import SHARED_CPUS, RunSpec
from ralp.emulation.budget import default_share
from ralp.errors import RalpError
from ralp.planner.host import OVERLAP_FIELDS

CALIBRATION_STEPS = 10  # timed steps of each of the whole model and its tail
CALIBRATION_TIMEOUT_S = 1800.0
CALIBRATION_STOP_S = 30.0  # a stopped calibration's time to clean up before it is killed


class CalibrationFailed(RalpError, RuntimeError):
    """The calibration command failed; its message says why (the runs go on uncalibrated)."""


def workload_key(run: RunSpec) -> tuple:
    # the default share depends on the devices on the host; CPUs asked by hand do not
    budget = (run.device_cpus, run.devices if default_share(run.device_cpus) else None)
    return (run.model, run.batch_size, run.image_size, run.num_classes, *budget)


def calibration_command(run: RunSpec, output: str, overlaps_from: str | None = None,
                        transfer_rate: str | None = None) -> list[str]:
    """The planner's calibration of ``run``'s workload on its budget; ``transfer_rate``: the
    simulated fabric's link rate, at which budgeted devices also measure gRPC's CPU per
    byte (on shared CPUs it is not measured)."""
    where = (["--shared-host"] if run.device_cpus == SHARED_CPUS else
             ["--device-cpus", run.device_cpus, "--devices", str(run.devices)])
    reuse = ["--overlap-from", overlaps_from] if overlaps_from else []
    if transfer_rate and run.device_cpus != SHARED_CPUS:
        reuse += ["--transfer-rates", transfer_rate]
    return [sys.executable, "-m", "ralp.planner.calibrate_cli", *where, *reuse,
            "--model", run.model, "--batch-size", str(run.batch_size),
            "--image-size", str(run.image_size), "--num-classes", str(run.num_classes),
            "--steps", str(CALIBRATION_STEPS), "--output", output]


def budget_key(run: RunSpec) -> tuple | None:
    """The devices' budget ``run`` calibrates on (None: shared CPUs, no rings' overlaps)."""
    return None if run.device_cpus == SHARED_CPUS else (run.device_cpus, run.devices)


def calibrate_workload(run: RunSpec, overlaps: dict | None = None,
                       transfer_rate: str | None = None) -> dict:
    """The calibration JSON (``ralp.planner.calibration.Calibration``'s) of ``run``'s
    workload, measured now on this host, with when it was taken. ``overlaps``: an earlier
    calibration of the same budget whose rings' overlaps serve this one (they are the
    rings', not the model's: probing them again would cost minutes a workload)."""
    with tempfile.TemporaryDirectory(prefix="ralp-calibration-") as tmp:
        output = str(Path(tmp) / "calibration.json")
        overlaps_from = None
        if overlaps is not None:
            overlaps_from = str(Path(tmp) / "overlaps.json")
            Path(overlaps_from).write_text(json.dumps(overlaps))
        started = time.time()
        returncode, stderr = _run_calibration(
            calibration_command(run, output, overlaps_from, transfer_rate), run.model)
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
        self._taken: dict[tuple, dict | None] = {}
        self._overlaps: dict[tuple, dict] = {}  # budget -> the first calibration with them
        self._announce = announce

    def for_run(self, run: RunSpec, round_index: int = 0) -> dict | None:
        """``run``'s workload's calibration in round ``round_index``, measured now if this
        round has none yet."""
        key = (*workload_key(run), round_index)
        if key not in self._taken:
            budget = budget_key(run)
            try:
                taken = calibrate_workload(run, self._overlaps.get(budget), self._transfer_rate)
                self._taken[key] = taken
                host = taken.get("host", {})
                if budget is not None and any(host.get(name) not in (None, [], ())
                                              for name in OVERLAP_FIELDS):
                    self._overlaps.setdefault(budget, taken)
            except CalibrationFailed as e:
                self._announce(f"ralp.bench: {e}; its records go without a calibration")
                self._taken[key] = None
        return self._taken[key]
