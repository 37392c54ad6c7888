"""Run one experiment: its commands in order, its files under ``lab/results/NAME/``.

Before the first command the runner writes ``environment.json`` (Python, TensorFlow, Keras
and Horovod versions, the host's CPUs and memory, the commit and whether the tree was
clean); as each command ends it appends the command and its exit status to
``commands.txt``. A command that fails stops the experiment unless its step says it may fail.
Interrupted, the runner stops the command it started (by its process id) and records that.
A run of one setting (``--setting S``) writes ``environment-S.json`` and ``commands-S.txt``
instead, so that the other settings' records stay.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from lab.registry import ROOT, Experiment, Lab, Step


class StepFailed(RuntimeError):
    """A command of an experiment exited non-zero and its step may not fail."""


def environment() -> dict:
    """The versions, host and commit an experiment's results come from."""
    versions = {}
    for package in ("tensorflow-cpu", "tensorflow", "keras", "horovod", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return {"python": platform.python_version(), "packages": versions,
            "host": {"cpus": os.cpu_count(), "machine": platform.machine(),
                     "memory_bytes": _memory_bytes()},
            "commit": _git("rev-parse", "HEAD"),
            "tree_clean": _git("status", "--porcelain") == "",
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=False)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def log_names(setting: str | None) -> tuple[str, str]:
    """The files a run records its environment and its commands in."""
    tail = f"-{setting}" if setting else ""
    return f"environment{tail}.json", f"commands{tail}.txt"


def run(experiment: Experiment, lab: Lab) -> int:
    """Run every step of ``experiment``; returns how many steps failed (and were allowed to)."""
    plan = experiment.plan(lab)  # before anything is written: a module's error stops nothing
    lab.out.mkdir(parents=True, exist_ok=True)
    environment_name, commands_name = log_names(lab.setting)
    (lab.out / environment_name).write_text(json.dumps(environment(), indent=2) + "\n")
    log = lab.out / commands_name
    setting = f" --setting {lab.setting}" if lab.setting else ""
    log.write_text(f"# python -m lab run {experiment.name}{setting}\n")
    failed = 0
    for name, steps in plan:
        if name and not lab.setting:
            with log.open("a") as out:
                out.write(f"# setting {name}\n")
        for step in steps:
            print(f"[lab] {step.line()}", flush=True)
            started = time.monotonic()
            code = _run_step(step, lab)
            with log.open("a") as out:
                out.write(f"{step.line()}\n# exit {code}, {time.monotonic() - started:.0f} s\n")
            if code != 0:
                if not step.may_fail:
                    raise StepFailed(f"{step.line()} exited {code}")
                failed += 1
    return failed


def _run_step(step: Step, lab: Lab) -> int:
    stdout = (ROOT / step.stdout).open("a" if step.append else "w") if step.stdout else None
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    process = subprocess.Popen(step.argv, cwd=ROOT, stdout=stdout or sys.stdout, env=env)
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise
    finally:
        if stdout is not None:
            stdout.close()


def dry_run(experiment: Experiment, lab: Lab) -> list[str]:
    """The command lines ``run`` would run, each setting's under a comment that names it;
    nothing run or written."""
    if experiment.retired:
        return [f"# retired: see {retired_readme(experiment.name)}"]
    lines = []
    for name, steps in experiment.plan(lab):
        if name and not lab.setting:
            lines.append(f"# setting {name}: {experiment.settings[name]}")
        lines += [step.line() for step in steps]
    return lines


def retired_readme(name: str) -> str:
    """Where a retired experiment's results say what was asked and found."""
    return f"lab/results/{name}/README.md"


def results_dir(name: str, root: Path | None = None) -> Path:
    from lab.registry import RESULTS_DIR

    return (root or RESULTS_DIR) / name
