"""A command run beside a CPU-bound load held in a group of its own: its exit status passed
on, the load held to its CPUs, and nothing of it left behind."""

import os
import sys

import pytest

from lab.tools.cpu_load import main
from tests.emulation.cgroups import HIERARCHY, needs_cgroups


def _groups() -> set[str]:
    return {name for name in os.listdir(HIERARCHY.limit) if name.startswith(f"rlp{os.getpid()}-")}


@needs_cgroups
def test_the_load_is_held_to_its_cpus_and_leaves_nothing(capfd):
    code = "import time; time.sleep(1.5); raise SystemExit(3)"
    assert main(["--cpus", "0.2", "--", sys.executable, "-c", code]) == 3
    said = capfd.readouterr().err
    used = float(said.split(" used ")[1].split()[0])
    assert 0.1 <= used <= 0.25, said  # held to 0.2 CPU, not the one CPU it would spin
    assert _groups() == set()
    assert "while True" not in os.popen(f"ps -o args= --ppid {os.getpid()}").read()


def test_bad_words_are_refused_before_anything_starts(capsys):
    for args in (["--cpus", "many", "--", "true"], ["--cpus", "0.5"],
                 ["--cpus", "0.5", "--processes", "0", "--", "true"]):
        with pytest.raises(SystemExit) as e:
            main(args)
        assert e.value.code == 2
    assert "give a number of CPUs or 'none'" in capsys.readouterr().err
