"""Every runtime keeps the contract the trainer, the fit loop and the stepper drive
(:class:`ralp.training.runtime.Runtime`): each declared operation, with the declared parameter
names, and each declared attribute; and nothing outside a runtime's own package reads a
runtime's private attributes."""

import ast
import inspect
import re
from pathlib import Path

import pytest

from ralp.collective.runtime import CollectiveRuntime
from ralp.horovod.runtime import HorovodRuntime
from ralp.horovod.stanza import StanzaRuntime
from ralp.ps_strategy.runtime import PSRuntime
from ralp.training.runtime import Runtime

RUNTIMES = [PSRuntime, HorovodRuntime, StanzaRuntime, CollectiveRuntime]
ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = {name: member for name, member in vars(Runtime).items()
              if inspect.isfunction(member) and not name.startswith("_")}
ATTRIBUTES = sorted(Runtime.__annotations__)


def _parameters(function) -> list[str]:
    return [p.name for p in inspect.signature(function).parameters.values()]


def _assigned_in(cls) -> set[str]:
    """``self.NAME = ...`` anywhere in the class or its bases (attributes set when made)."""
    names = set()
    for klass in cls.__mro__[:-1]:
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        names |= set(re.findall(r"self\.(\w+)(?:\s*,\s*self\.\w+)*\s*(?::[^=]+)?=(?!=)", source))
        for line in re.findall(r"^\s*((?:self\.\w+\s*,\s*)+self\.\w+)\s*=", source, re.M):
            names |= set(re.findall(r"self\.(\w+)", line))
    return names


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda c: c.__name__)
def test_every_runtime_has_every_operation_with_its_parameters(runtime):
    for name, declared in OPERATIONS.items():
        ours = getattr(runtime, name, None)
        assert callable(ours), f"{runtime.__name__} has no {name}()"
        assert _parameters(ours) == _parameters(declared), f"{runtime.__name__}.{name}"


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda c: c.__name__)
def test_every_runtime_has_every_declared_attribute(runtime):
    assigned = _assigned_in(runtime)
    missing = [a for a in ATTRIBUTES if not hasattr(runtime, a) and a not in assigned]
    assert missing == [], f"{runtime.__name__} lacks {missing}"


def test_no_caller_reads_a_runtimes_private_attributes():
    """``runtime._x``, ``rt._x`` or ``trainer._x`` in ralp outside the runtimes' own modules,
    or anywhere in the lab (which uses only public names)."""
    own = {"ralp/ps_strategy", "ralp/horovod", "ralp/collective", "ralp/training/ranks.py",
           "ralp/training/trainer.py", "ralp/training/stepper.py"}  # the trainer's own stepper
    holders = {"runtime", "rt", "trainer"}
    found = []
    for path in [*(ROOT / "ralp").rglob("*.py"), *(ROOT / "lab").rglob("*.py")]:
        rel = path.relative_to(ROOT).as_posix()
        if any(rel.startswith(o) for o in own):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Attribute | ast.Name)
                    and getattr(node.value, "attr", getattr(node.value, "id", "")) in holders):
                found.append(f"{rel}:{node.lineno} {node.attr}")
    assert found == []
