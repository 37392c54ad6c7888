"""The examples the README points to run as documented."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.cluster
def test_train_digits_example():
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "train_digits.py"), "--mode", "ralp",
                           "--epochs", "4"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "offloaded after 'pool'" in proc.stdout
    m = re.search(r"mode ralp: test accuracy (\d\.\d+)", proc.stdout)
    assert m and float(m.group(1)) > 0.85, proc.stdout


@pytest.mark.cluster
def test_collective_check_example_on_the_cpu():
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "collective_check.py"),
                           "--workers", "2", "--model", "lenet", "--image-size", "28",
                           "--steps", "5"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "replicas identical after training" in proc.stdout
    assert len(re.findall(r"worker \d: weights [0-9a-f]{16}, devices \['CPU'\]", proc.stdout)) == 2
