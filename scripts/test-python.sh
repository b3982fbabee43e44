#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build, install and test the Python package `rove` (python/rove) from this checkout.
#
#   bash scripts/test-python.sh            # venv at ./.venv (or $ROVE_VENV)
#
# 1. scripts/install-deps.sh: the Debian packages (compiler, CMake, OpenBLAS, ...).
# 2. A virtual environment at ${ROVE_VENV:-<repo>/.venv} (created if missing) with torch,
#    transformers, numpy, pytest from PyPI (first install: ~6 minutes, ~5.5 GB; later runs
#    reuse it).
# 3. `pip install .` of the repository (not editable): scikit-build-core builds librove
#    with CMake and ships librove.so inside the package.
# 4. pytest tests/python. A skipped test is a failure (a skipped integration test proves
#    nothing) unless ROVE_PY_ALLOW_SKIP=1.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/install-deps.sh python3-venv

venv=${ROVE_VENV:-$root/.venv}
python=${ROVE_PYTHON:-python3}
if ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then # missing, or its python gone
  if [ -f "$venv/pyvenv.cfg" ]; then
    echo "test-python: $venv is a broken venv; recreating it"
    rm -rf "$venv"
  elif [ -e "$venv" ] && [ -n "$(ls -A "$venv")" ]; then
    echo "test-python: $venv exists and is not a venv; set ROVE_VENV elsewhere" >&2
    exit 1
  fi
  echo "test-python: creating $venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
fi
py="$venv/bin/python"
"$py" -m pip install -q torch transformers numpy pytest scikit-build-core
# --no-build-isolation: build with the venv's scikit-build-core instead of fetching one
# into a throw-away environment on every run (a plain `pip install .` works as well).
"$py" -m pip install -q --no-build-isolation "$root"

# Never import the package from the source tree: test what pip installed.
cd "$root"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
"$py" -m pytest tests/python -q -rs "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  exit "$status"
fi
if grep -Eq '[0-9]+ skipped' "$log" && [ "${ROVE_PY_ALLOW_SKIP:-0}" != 1 ]; then
  echo "test-python: tests were skipped (see above); set ROVE_PY_ALLOW_SKIP=1 to allow" >&2
  exit 1
fi
echo "test-python: OK"
