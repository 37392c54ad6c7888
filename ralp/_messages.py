"""Messages from a job's rank 0 (a Horovod or collective job) to whoever launched it, as
marker lines on stdout.

``horovodrun`` forwards every rank's output (``[0]<stdout>:...``), so a marker line needs no
shared file system and works on a real cluster too. A job sends progress (``phase``,
``step``), its result (``record``) or its error (``error``).
"""

from __future__ import annotations

import json

MARK = "@ralp-bench "


def emit(kind: str, value) -> None:
    """Send one message to the launcher (only rank 0 should call this)."""
    print(MARK + json.dumps({kind: value}), flush=True)


def parse_message(line: str) -> dict | None:
    """The message in one line of a job's output, or None for any other line."""
    at = line.find(MARK)
    if at < 0:
        return None
    try:
        return json.loads(line[at + len(MARK) :])
    except json.JSONDecodeError:
        return None
