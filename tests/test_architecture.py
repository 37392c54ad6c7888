"""The package's shape: imports point one way (profile -> plan -> place -> run -> measure), no
two files or subpackages import each other, and no module grows past its budget."""

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ralp"
MAX_LINES = 450

# Layers, lowest first. A module may import its own layer-room (subpackage) and lower layers
# only; rooms of one layer never import each other.
LAYERS: list[set[str]] = [
    {"errors"},  # RalpError and the errors every layer raises: no ralp imports at all
    {"_text", "_cli", "_compat", "_messages", "_process", "defaults"},  # foundation
    {"units"},  # link rates and delays as users write them
    {"models"},  # the zoo
    {"profiler"},  # profile
    {"emulation"},  # the simulated cluster's network (namespaces, links) and devices (budgets)
    {"training"},  # what a model trains with, its data, the fit loop, checkpoints
    {"placement", "cluster"},  # plan and place; clusters (specs, task processes)
    {"ps_strategy", "horovod", "collective"},  # run
    {"planner"},  # predict every mode's throughput from calibration + byte model; choose
    {"wrapping"},  # ralp.wrap: a mode's runtime, planned, behind the one trainer
    {"audit"},  # measure: where a real step's ops ran
    {"bench"},  # measure: the benchmark harness on top
    {"server", "plan"},  # the entry-point shims of `python -m ralp.server` and `ralp.plan`
]
RANK = {room: k for k, rooms in enumerate(LAYERS) for room in rooms}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The ralp module an import names (``from a.b import c`` may name module a.b.c)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every ralp module imported anywhere in the file (functions included), except under
    ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    skipped = {id(node) for stmt in ast.walk(tree) if isinstance(stmt, ast.If)
               and getattr(stmt.test, "id", None) == "TYPE_CHECKING"
               for node in ast.walk(stmt)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("ralp."):
                target = _resolve(name, modules)
                if target and target != "ralp":
                    found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()
            if name != "ralp"}  # ralp/__init__ is the lazy public facade


def _room(module: str) -> str:
    return module.split(".")[1]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_every_room_has_a_layer():
    rooms = {_room(m) for m in _graph()}
    assert rooms <= set(RANK), f"give {sorted(rooms - set(RANK))} a layer in LAYERS"


def test_no_two_files_import_each_other():
    assert _cycles(_graph()) == []


def test_no_two_subpackages_import_each_other():
    rooms: dict[str, set[str]] = defaultdict(set)
    for module, targets in _graph().items():
        rooms[_room(module)] |= {_room(t) for t in targets} - {_room(module)}
    assert _cycles(rooms) == []


def test_imports_point_down_the_layers():
    wrong = []
    for module, targets in _graph().items():
        here = _room(module)
        for target in targets:
            there = _room(target)
            if there != here and RANK[there] >= RANK[here]:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_the_checker_sees_a_loop_and_an_upward_import():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert RANK["profiler"] < RANK["bench"]  # so bench -> profiler is allowed, not the reverse


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_budget(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines: split it by job"


def test_the_architecture_page_maps_every_package_and_names_no_missing_file():
    """docs/architecture.md's module map is current: every package and top-level module of
    ralp is on it, and every ralp path it names exists."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`(ralp/[\w/]+(?:\.py)?/?)`", page))
    named |= set(re.findall(r"\b(ralp/[\w/]+\.py)\b", page))
    on_disk = {f"ralp/{p.name}/" for p in (root / "ralp").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()}
    on_disk |= {f"ralp/{p.name}" for p in (root / "ralp").glob("*.py")
                if p.name not in ("__init__.py", "__main__.py")}
    mentioned = {n if n.endswith((".py", "/")) else n + "/" for n in named}
    missing = sorted(m for m in on_disk if not any(n == m or n.startswith(m) for n in mentioned))
    assert not missing, f"docs/architecture.md does not map {missing}"
    gone = sorted(n for n in mentioned if not (root / n.rstrip("/")).exists())
    assert not gone, f"docs/architecture.md names files that do not exist: {gone}"


def _imports_lab(path: Path) -> bool:
    """Whether the file imports ``lab`` or a module of it anywhere (functions included)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        if any(name == "lab" or name.startswith("lab.") for name in names):
            return True
    return False


def test_the_package_never_imports_the_lab():
    """The lab (experiments, studies, host models) imports ralp; ralp, installed without the
    lab, must not import it."""
    wrong = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if _imports_lab(p))
    assert wrong == []


def test_the_lab_checker_sees_an_import_of_the_lab(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from lab.studies import chaos\n")
    assert _imports_lab(module)
    module.write_text("import labels\nfrom ralp import lab_like\n")
    assert not _imports_lab(module)
