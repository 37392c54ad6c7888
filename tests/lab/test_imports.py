"""Every module under ``lab/`` imports, and every name it imports from ralp or the lab, at any
depth (inside functions too), exists: a name ralp no longer has is a failure here, not a
surprise on an experiment's first line."""

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for p in (ROOT / "lab").rglob("*.py")
               if "results" not in p.relative_to(ROOT / "lab").parts)


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


@pytest.mark.parametrize("path", FILES, ids=_module)
def test_every_lab_module_and_every_name_it_takes_from_ralp_exists(path):
    if path.name != "__main__.py":  # a __main__ runs its command when imported
        importlib.import_module(_module(path))
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (
                node.module or "").split(".")[0] in ("ralp", "lab"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):  # a submodule is imported, not an attribute
                    importlib.import_module(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ("ralp", "lab"):
                    importlib.import_module(alias.name)
