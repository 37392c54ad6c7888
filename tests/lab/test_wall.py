"""The lab stops at the package's wall: it imports no private name of ralp (one whose name, or
whose module's name, starts with ``_``) except from ralp's shared toolkit below, which the
lab's commands use to fail, print and clean up as ralp's own do."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# ralp's private modules the lab may use: its commands' usage errors and argument types, text
# tables, messages to a parent process, its own processes' stopping, and the private
# TensorFlow APIs (each with its canary in tests/test_compat.py)
TOOLKIT = {"ralp._cli", "ralp._text", "ralp._messages", "ralp._process", "ralp._compat"}


def _private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ralp":
            private_module = any(p.startswith("_") for p in node.module.split("."))
            for alias in node.names:
                if alias.name.startswith("_") or (private_module
                                                  and node.module not in TOOLKIT):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module} "
                                 f"import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "ralp" and any(p.startswith("_") for p in parts) \
                        and alias.name not in TOOLKIT:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} import {alias.name}")
    return found


def test_the_lab_imports_only_ralps_public_names():
    found = [line for path in sorted((ROOT / "lab").rglob("*.py"))
             for line in _private_imports(path)]
    assert not found, "the lab reaches past ralp's public names:\n" + "\n".join(found)
