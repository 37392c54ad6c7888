"""The package's shape: imports point one way (profile -> plan -> place -> run -> measure), no
two files or subpackages import each other, and no module grows past its budget."""

import ast
import re
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
    {"_text", "_cli", "_compat", "_messages", "_named", "_process", "defaults", "modes"},  # foundation
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
    {"server"},  # the entry-point shim of `python -m ralp.server`
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
    """Every ralp module imported anywhere in the file: functions included, and under
    ``if TYPE_CHECKING:`` too (a type-only import is still a dependency: a circle through one
    is a circle)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
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


def test_the_checker_sees_a_type_only_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                      "    from ralp.emulation.devices import DeviceGroups\n")
    assert _imports(module, _modules()) == {"ralp.emulation.devices"}


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_budget(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines: split it by job"


ARCHITECTURE_PAGE = ROOT / "docs" / "architecture.md"
# a repository path the page names: ralp/..., lab/..., tests/... (a file or a folder)
_PAGE_PATH = re.compile(r"(?<![\w.-])((?:ralp|lab|tests|examples|benchmarks|docs|scripts)/"
                        r"(?:[\w./-]*[\w/])?)")
_BARE_FILE = re.compile(r"`(\w+\.py)`")  # a file named without its folder: `report.py`
_RUN = re.compile(r"python -m ([\w.]+)")


def _page_blocks(text: str) -> list[str]:
    """The page's paragraphs, table rows and list items, each a block of its own."""
    blocks, current = [], []
    for line in text.splitlines():
        if not line.strip() or re.match(r"\s*(\||\d+\. |- )", line):
            if current:
                blocks.append("\n".join(current))
            current = []
        if line.strip():
            current.append(line)
    return blocks + (["\n".join(current)] if current else [])


def _page_problems(text: str, root: Path) -> list[str]:
    """What the architecture page gets wrong about the tree at ``root``: a package or
    top-level module of ralp it does not name; a path, a file named beside a path of its
    block (``ralp/bench/records.py`` ... ``report.py``) or a ``python -m`` module that does
    not exist."""
    named = {m.rstrip("/.") for m in _PAGE_PATH.findall(text)}
    package = root / "ralp"
    wanted = {f"ralp/{p.name}" for p in package.iterdir()
              if p.is_dir() and any(p.glob("*.py"))}
    wanted |= {f"ralp/{p.name}" for p in package.glob("*.py")
               if p.name not in ("__init__.py", "__main__.py")}
    problems = [f"does not name {m}" for m in sorted(wanted)
                if not any(n == m or n.startswith(m + "/") for n in named)]
    problems += [f"names {n}, which does not exist" for n in sorted(named)
                 if not (root / n).exists()]
    for block in _page_blocks(text):
        paths = [root / m.rstrip("/.") for m in _PAGE_PATH.findall(block)]
        folders = {p if p.is_dir() else p.parent for p in paths}
        problems += [f"names {name} beside {sorted(str(f.relative_to(root)) for f in folders)}, "
                     f"in none of them" for name in _BARE_FILE.findall(block)
                     if not any((f / name).is_file() for f in folders)]
    for module in sorted(set(_RUN.findall(text))):
        base = root.joinpath(*module.split("."))
        if not (base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()):
            problems.append(f"runs python -m {module}, which does not exist")
    return problems


def test_the_architecture_page_maps_the_package_as_it_is():
    """docs/architecture.md's module map is current: every package and top-level module of
    ralp is on it, and every path, file and ``python -m`` module it names exists."""
    assert _page_problems(ARCHITECTURE_PAGE.read_text(), ROOT) == []


def test_the_page_checker_sees_a_missing_package_and_a_stale_name(tmp_path):
    for name in ("ralp/bench/runner.py", "ralp/bench/__main__.py", "ralp/units.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    good = "| run | `ralp/bench/runner.py`, `__main__.py`: `python -m ralp.bench` |\n\n`ralp/units.py`"
    assert _page_problems(good, tmp_path) == []
    stale = ("| run | `ralp/bench/job.py`, `report.py`: `python -m ralp.plan` |\n\n"
             "`ralp/units.py`")
    assert _page_problems(stale, tmp_path) == [
        "names ralp/bench/job.py, which does not exist",
        "names report.py beside ['ralp/bench'], in none of them",
        "runs python -m ralp.plan, which does not exist",
    ]
    assert _page_problems("`ralp/units.py`", tmp_path) == ["does not name ralp/bench"]


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
