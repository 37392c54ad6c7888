#!/usr/bin/env bash
# Set up ralp from a fresh clone: a virtual environment in .venv with the pinned
# dependencies and ralp installed in editable mode. Safe to run again (it is quick
# when everything is already installed).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    echo "setup: ralp needs Python 3.11 (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
    exit 2
fi

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $("$PYTHON" --version)"
    "$PYTHON" -m venv .venv
fi

# Only run pip when the pinned set changed since the last successful install.
stamp=.venv/.ralp-installed
want=$(cat requirements.txt constraints.txt setup.py | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing pinned dependencies (requirements.txt, constraints.txt)"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check \
        -r requirements.txt -c constraints.txt
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
    echo "$want" > "$stamp"
fi
echo "setup: ready ($(.venv/bin/python -c 'import importlib.metadata as m; print("tensorflow-cpu", m.version("tensorflow-cpu"), "keras", m.version("keras"))'))"
