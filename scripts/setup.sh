#!/usr/bin/env bash
# Set up ralp from a fresh clone: a virtual environment in .venv with the pinned
# dependencies, ralp installed in editable mode, and Horovod 0.28.1 (Gloo) built once and
# cached outside the repository (scripts/build_horovod.sh). Safe to run again (it is quick
# when everything is already installed). RALP_HOROVOD=0 skips Horovod (no 'horovod' bench mode).
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
# Horovod: only when missing or built for another TensorFlow (the build script checks).
if [ "${RALP_HOROVOD:-1}" != 0 ]; then
    hvd_stamp=.venv/.ralp-horovod
    hvd_want=$(sha256sum scripts/build_horovod.sh constraints.txt | sha256sum | cut -d' ' -f1)
    if [ ! -f "$hvd_stamp" ] || [ "$(cat "$hvd_stamp")" != "$hvd_want" ] \
        || ! .venv/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("horovod") is None)'; then
        ./scripts/build_horovod.sh
        echo "$hvd_want" > "$hvd_stamp"
    fi
fi
.venv/bin/python - <<'PY'
import importlib.metadata as m

found = []
for name in ("tensorflow-cpu", "keras", "horovod"):
    try:
        found.append(f"{name} {m.version(name)}")
    except m.PackageNotFoundError:
        pass
print(f"setup: ready ({', '.join(found)})")
PY
