#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install missing packages, build librove (Release, in build/) and run `rove demo`:
# GPT-2-small attention (12 heads x 64, n = 1024, causal) with RoVE and plain RoPE,
# both checked against the double-precision oracle. Extra arguments go to `rove demo`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${ROVE_JOBS:-$(nproc 2>/dev/null || echo 2)}

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs" --target rove_cli
echo
exec build/tools/rove demo "$@"
