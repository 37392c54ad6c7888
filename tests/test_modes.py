"""The mode registry (ralp/modes.py) is the one place that knows every mode: outside it a mode's
name is a code literal only in the mode's own package, and what the planner, the bench and
``ralp.wrap`` list about modes is read from it."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from ralp import modes as registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ralp"

# Where each mode's name may be written as a code literal, besides the registry.
OWN = {
    registry.PS: ("ralp/ps_strategy",),
    registry.RALP: ("ralp/ps_strategy",),
    registry.RALP_H: ("ralp/ps_strategy",),
    registry.RALP_N: ("ralp/ps_strategy",),
    registry.HOROVOD: ("ralp/horovod",),
    registry.STANZA: ("ralp/horovod",),
    registry.COLLECTIVE: ("ralp/collective",),
    registry.AUTO: ("ralp/planner/auto.py",),
    registry.SKEWNESS: ("ralp/placement",),
}
# Names that also mean something else: "ps" is also the PS job's name and a record's count of
# PS tasks, "ralp" the package's own name, "auto" the value of options that are not modes
# (verbose, backends, device budgets, dilation, a collective's implementation), "skewness" a
# record's figure. Outside their own package they are allowed in these files only, and there
# never where they read as a mode (compared with, passed as or assigned to a ``mode``).
OTHER_MEANINGS = {
    registry.PS: {"ralp/cluster/spec.py", "ralp/cluster/task_server.py",
                  "ralp/training/fit_loop.py", "ralp/placement/plan.py",
                  "ralp/audit/step_audit.py", "ralp/profiler/render.py", "ralp/bench/records.py",
                  "ralp/bench/measure.py", "ralp/bench/bound.py", "ralp/bench/report.py",
                  "ralp/bench/launcher.py", "ralp/cluster/netns_cluster.py", "ralp/audit/cli.py"},
    registry.RALP: {"ralp/planner/rates_cache.py", "ralp/training/compile.py",
                    "ralp/training/objective.py"},
    registry.AUTO: {"ralp/training/trainer.py", "ralp/planner/device.py", "ralp/emulation/budget.py",
                    "ralp/emulation/watchers.py", "ralp/bench/pace.py", "ralp/bench/cli.py",
                    "ralp/bench/config.py", "ralp/bench/records.py", "ralp/bench/mode_choice.py",
                    "ralp/bench/rounds.py", "ralp/bench/runspec.py", "ralp/bench/report.py",
                    "ralp/collective/runtime.py"},
    registry.SKEWNESS: {"ralp/profiler/render.py", "ralp/bench/records.py",
                        "ralp/bench/ps_job.py", "ralp/bench/horovod_job.py",
                        "ralp/bench/collective_job.py"},
}
NAMES = set(OWN)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _names_mode(node: ast.AST) -> bool:
    """Whether ``node`` (a name, an attribute, a keyword's or a parameter's name) says mode."""
    name = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
            else node if isinstance(node, str) else "")
    return "mode" in name.lower()


def _mode_contexts(tree: ast.AST) -> set[int]:
    """The string constants that read as a mode: compared with a ``mode``, passed as one
    (``mode="ps"``), a ``mode`` parameter's default, or in a value assigned to a ``*mode*``."""
    found = set()

    def mark(node):  # the value itself, or a choice of values: not what it is computed from
        if isinstance(node, ast.Constant):
            found.add(id(node))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            for element in node.elts:
                mark(element)
        elif isinstance(node, ast.Dict):
            for part in (*node.keys, *node.values):
                if part is not None:
                    mark(part)
        elif isinstance(node, ast.IfExp):
            mark(node.body)
            mark(node.orelse)

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
                _names_mode(side) for side in (node.left, *node.comparators)):
            for side in (node.left, *node.comparators):
                mark(side)
        elif isinstance(node, ast.keyword) and node.arg and _names_mode(node.arg):
            mark(node.value)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and any(_names_mode(t) for t in targets):
                mark(node.value)
        elif isinstance(node, ast.arguments):
            args = [*node.posonlyargs, *node.args]
            pairs = [*zip(args[len(args) - len(node.defaults):], node.defaults, strict=True),
                     *zip(node.kwonlyargs, node.kw_defaults, strict=True)]
            for arg, default in pairs:
                if default is not None and _names_mode(arg.arg):
                    mark(default)
    return found


def mode_literals(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: 'name'`` for every mode name written as a code literal in ``path`` where it
    does not belong: outside the registry and the mode's own package (docstrings aside)."""
    rel = path.relative_to(root).as_posix()
    if rel == "ralp/modes.py":
        return []
    tree = ast.parse(path.read_text())
    skipped, as_mode = _docstrings(tree), _mode_contexts(tree)
    wrong = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and node.value in NAMES) or id(node) in skipped:
            continue
        name = node.value
        if any(rel == own or rel.startswith(own + "/") for own in OWN[name]):
            continue
        if rel in OTHER_MEANINGS.get(name, ()) and id(node) not in as_mode:
            continue
        wrong.append(f"{rel}:{node.lineno}: {name!r}")
    return sorted(wrong)


def test_no_mode_name_outside_its_package_and_the_registry():
    wrong = [w for path in sorted(PACKAGE.rglob("*.py")) for w in mode_literals(path)]
    assert wrong == [], "write these with ralp.modes (its constants or its table):\n" + \
        "\n".join(wrong)


def test_the_scan_sees_a_mode_literal_and_spares_docstrings_and_other_meanings(tmp_path):
    (tmp_path / "ralp" / "bench").mkdir(parents=True)
    (tmp_path / "ralp" / "cluster").mkdir()
    module = tmp_path / "ralp" / "bench" / "thing.py"
    module.write_text('"""Mode "stanza" in prose."""\n\n'
                      'def f(run, mode="auto"):\n'
                      '    """"horovod" in a docstring."""\n'
                      '    return run.mode == "stanza", {"ps": 1}\n')
    assert mode_literals(module, tmp_path) == ["ralp/bench/thing.py:3: 'auto'",
                                               "ralp/bench/thing.py:5: 'ps'",
                                               "ralp/bench/thing.py:5: 'stanza'"]
    spec = tmp_path / "ralp" / "cluster" / "spec.py"  # "ps" the job's name is allowed there
    spec.write_text('JOBS = ("chief", "worker", "ps")\nMODE = "ps"\n')
    assert mode_literals(spec, tmp_path) == ["ralp/cluster/spec.py:2: 'ps'"]


def test_the_table_is_whole():
    """Every mode has what each reader asks of it: resources, a byte-model key, a need, a
    bench job and a runtime that import, a colour and a place in the figure."""
    assert registry.NAMES == ("ps", "ralp-h", "ralp-n", "horovod", "stanza", "collective")
    assert sorted(m.plot_order for m in registry.MODES.values()) == list(range(len(registry.NAMES)))
    for mode in registry.MODES.values():
        assert mode.bytes_key in registry.BYTE_MODES
        assert mode.wrap_as in registry.WRAP_MODES
        assert mode.family in registry.STEP_FUNCTIONS
        assert callable(registry.load(mode.bench_job))
        assert callable(registry.load(mode.step_function))
        assert mode.resources(4, 1)[0] >= 1
    for wrap_mode in registry.WRAP_MODES.values():
        assert callable(registry.load(wrap_mode.runtime))


def test_the_readers_list_the_registry():
    from ralp.bench.plots import MODE_COLORS, MODE_ORDER
    from ralp.planner.cluster_plan import NEEDS
    from ralp.planner.modes import MODES, PREDICTED_MODES
    from ralp.profiler.bytes_model import MODES as BYTE_MODES
    from ralp.wrapping import MODES as WRAP_MODES

    assert MODES == PREDICTED_MODES == registry.NAMES
    assert set(NEEDS) == set(MODE_COLORS) == set(MODE_ORDER) == set(registry.NAMES)
    assert MODE_ORDER == ("ps", "ralp-h", "ralp-n", "horovod", "collective", "stanza")
    assert set(BYTE_MODES) == {m.bytes_key for m in registry.MODES.values()}
    assert WRAP_MODES == ("auto", "skewness", "ralp", "ps", "horovod", "stanza", "collective")


@pytest.mark.parametrize("name", ["ralp.modes"])
def test_the_registry_imports_no_tensorflow(name):
    code = (f"import sys, importlib; importlib.import_module({name!r}); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'keras', 'horovod') or (m.startswith('ralp.') and m != "
            f"{name!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.strip()
    assert out == "[]"
    assert importlib.import_module(name) is registry
