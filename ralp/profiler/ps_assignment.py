"""Which parameter-server task hosts what.

- Variables of layers that stay on the workers go round-robin over the PS tasks in creation
  order, as ``tf.distribute.ParameterServerStrategy`` does without a partitioner.
- Offloaded layers are spread over the PS tasks by bytes, each layer whole: the largest first,
  each to the least-loaded task (LPT). Layers without parameters (flatten, dropout...) run
  where the next parameter-owning offloaded layer runs, so they add no extra hop.
"""

from __future__ import annotations

from collections.abc import Sequence

from ralp.errors import InvalidArgumentError


def round_robin(count: int, num_ps: int) -> list[int]:
    """PS task of each of ``count`` variables created in order."""
    _check_num_ps(num_ps)
    return [k % num_ps for k in range(count)]


def spread_layers(names: Sequence[str], param_bytes: Sequence[int], num_ps: int) -> dict[str, int]:
    """PS task for each offloaded layer (in forward order), balancing bytes per task."""
    _check_num_ps(num_ps)
    if len(names) != len(param_bytes):
        raise InvalidArgumentError("names and param_bytes must have the same length")
    load = [0] * num_ps
    task: dict[str, int] = {}
    owners = sorted(
        (k for k, b in enumerate(param_bytes) if b > 0), key=lambda k: (-param_bytes[k], k)
    )
    for k in owners:
        target = min(range(num_ps), key=lambda p: (load[p], p))
        task[names[k]] = target
        load[target] += param_bytes[k]
    # Parameter-free layers follow the next owner downstream (or the last one before them).
    following: int | None = None
    for k in reversed(range(len(names))):
        if names[k] in task:
            following = task[names[k]]
        elif following is not None:
            task[names[k]] = following
    preceding = 0
    for name in names:
        if name in task:
            preceding = task[name]
        else:
            task[name] = preceding
    return {name: task[name] for name in names}


def _check_num_ps(num_ps: int) -> None:
    if not isinstance(num_ps, int) or num_ps < 1:
        raise InvalidArgumentError(f"the number of PS tasks must be a positive integer, got {num_ps!r}")
