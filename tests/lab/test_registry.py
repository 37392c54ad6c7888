"""The lab's registry: every experiment loads and says what it measures, its commands write
only into its own results folder, every results folder is an experiment's, and the command
line answers a wrong name without a traceback. Nothing here runs an experiment."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lab.registry import RESULTS_DIR, ROOT, Lab, experiments
from lab.runner import dry_run, results_dir

EXPERIMENTS = experiments()
# the options whose value is a file a command writes
OUTPUTS = ("--out", "--plot", "--csv", "--output")


def _lab(name: str) -> Lab:
    return Lab(python=".venv/bin/python", out=results_dir(name))


def _written(argv: tuple[str, ...]) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in OUTPUTS]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_there_are_experiments():
    assert "bench-headline" in EXPERIMENTS
    assert len(EXPERIMENTS) > 10


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_an_experiment_says_in_one_line_what_it_measures(name):
    found = EXPERIMENTS[name]
    assert found.summary and "\n" not in found.summary
    assert len(found.summary) <= 100
    assert all(isinstance(need, str) for need in found.needs)
    for setting, line in found.settings.items():
        assert setting and " " not in setting
        assert line and "\n" not in line


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_an_experiment_writes_only_into_its_own_folder(name):
    found = EXPERIMENTS[name]
    own = f"lab/results/{name}/"
    steps = found.steps(_lab(name))
    if found.retired:
        assert steps == []
        return
    assert steps, f"{name} runs nothing"
    for step in steps:
        for path in [*_written(step.argv), *([step.stdout] if step.stdout else [])]:
            assert path.startswith(own), f"{name}: {step.line()} writes {path}"


@pytest.mark.parametrize("name", sorted(n for n, e in EXPERIMENTS.items() if e.settings))
def test_each_setting_is_a_part_of_the_whole_run(name):
    found = EXPERIMENTS[name]
    every = [step.line() for step in found.steps(_lab(name))]
    parts = [step.line() for setting in found.settings
             for step in found.steps(Lab(python=".venv/bin/python", out=results_dir(name),
                                         setting=setting))]
    assert parts == every


@pytest.mark.parametrize("name", sorted(n for n, e in EXPERIMENTS.items() if e.retired))
def test_a_retired_experiment_says_where_its_story_is(name):
    assert dry_run(EXPERIMENTS[name], _lab(name)) == [
        f"# retired: see lab/results/{name}/README.md"]
    assert (RESULTS_DIR / name / "README.md").is_file()


def test_every_results_folder_is_an_experiments():
    if not RESULTS_DIR.is_dir():
        pytest.skip("no results yet")
    folders = sorted(p.name for p in RESULTS_DIR.iterdir() if p.is_dir())
    assert [name for name in folders if name not in EXPERIMENTS] == []


def test_every_results_folder_records_its_commands():
    if not RESULTS_DIR.is_dir():
        pytest.skip("no results yet")
    for folder in RESULTS_DIR.iterdir():
        if folder.is_dir():
            assert any(folder.glob("commands*.txt")), f"{folder.name} has no commands.txt"


def test_list_shows_every_experiment():
    done = _cli("list")
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0] for line in done.stdout.splitlines() if not line.startswith(" ")}
    assert listed == set(EXPERIMENTS)


def test_an_unknown_experiment_is_refused_without_a_traceback():
    done = _cli("run", "NO-SUCH")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "NO-SUCH" in done.stderr and "python -m lab list" in done.stderr


def test_an_unknown_setting_is_refused_without_a_traceback():
    done = _cli("run", "zoo-sweep", "--setting", "NO-SUCH", "--dry-run")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "1gbit" in done.stderr


def test_a_retired_experiment_is_not_run():
    name = next(n for n, e in sorted(EXPERIMENTS.items()) if e.retired)
    done = _cli("run", name)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and f"lab/results/{name}/README.md" in done.stderr


def test_a_dry_run_names_each_setting_before_its_commands():
    done = _cli("run", "zoo-sweep", "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("# setting 1gbit:")
    assert "lab/results/zoo-sweep/bench_sweep_1gbit.json" in lines[1]
    one = _cli("run", "zoo-sweep", "--setting", "10gbit", "--dry-run")
    assert one.returncode == 0 and not one.stdout.startswith("#")
    assert "bench_sweep_10gbit.json" in one.stdout and "1gbit.json" not in one.stdout


def test_a_run_appends_where_a_step_says_and_records_each_setting(tmp_path):
    from types import SimpleNamespace

    from lab.registry import Experiment, Step, relative
    from lab.runner import run

    def steps(lab: Lab) -> list[Step]:
        out = lab.path("said.txt")
        return [Step(("echo", f"{lab.setting} one"), stdout=out),
                Step(("echo", f"{lab.setting} two"), stdout=out, append=True)]

    module = SimpleNamespace(SUMMARY="echoes", steps=steps, SETTINGS={"a": "A", "b": "B"})
    echoes = Experiment("echoes", module, module.SUMMARY)
    lab = Lab(python=relative(sys.executable), out=tmp_path)
    assert run(echoes, lab) == 0
    assert (tmp_path / "said.txt").read_text() == "b one\nb two\n"
    logged = (tmp_path / "commands.txt").read_text()
    assert "# setting a\n" in logged and "# setting b\n" in logged
    assert (tmp_path / "environment.json").is_file()
    assert run(echoes, Lab(python=lab.python, out=tmp_path, setting="a")) == 0
    assert (tmp_path / "said.txt").read_text() == "a one\na two\n"
    assert (tmp_path / "commands-a.txt").read_text().startswith(
        "# python -m lab run echoes --setting a\n")
    assert (tmp_path / "environment-a.json").is_file()
    assert "# setting b" in (tmp_path / "commands.txt").read_text()
