"""The package as a whole: its public API, import cost, and lint."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ralp

ROOT = Path(__file__).resolve().parents[1]


def test_every_public_name_resolves():
    for name in ralp.__all__:
        assert getattr(ralp, name) is not None, name
    with pytest.raises(AttributeError):
        _ = ralp.no_such_thing


def test_every_exported_error_is_a_ralp_error():
    errors = [name for name in ralp.__all__ if name.endswith("Error")]
    assert len(errors) >= 10
    for name in errors:
        assert issubclass(getattr(ralp, name), ralp.RalpError), name


def test_import_has_no_heavy_side_effects():
    # `import ralp` must not pull TensorFlow in: the API loads lazily.
    code = "import sys, ralp; print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it is in requirements.txt)")
    proc = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_warnings_point_at_the_callers_line_outside_ralp():
    import warnings

    from ralp import errors

    # a function "inside ralp" (compiled with a filename in the package) that warns
    inside = str(Path(errors.__file__).with_name("_placing.py"))
    scope = {"warn": errors.warn}
    exec(compile("def place():\n    warn('nothing to offload', UserWarning)\n", inside, "exec"),
         scope)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scope["place"]()  # this line is the user's
    (w,) = caught
    assert w.filename == __file__ and "nothing to offload" in str(w.message)
