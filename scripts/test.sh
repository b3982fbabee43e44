#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build librove and run the whole test suite in several builds, plus the Python package's tests:
#   build/                 Release                                   (ctest -j2)
#   build-asan/            RelWithDebInfo + ROVE_SANITIZE=ON (ASan+UBSan)
#   build-portable/        Release without SIMD kernels and without threads
#   build-openblas-openmp/ Release with Debian's OpenMP build of OpenBLAS
#   build-debug/           Debug (-O0 -Werror), compiled only (its tests are not run)
#   build-valgrind/        RelWithDebInfo, a subset of the suites under valgrind memcheck
#                          (ROVE_ISA=scalar and the best ISA; scripts/valgrind.sh)
#   build-tsan/            RelWithDebInfo + ThreadSanitizer, the threaded suites (scripts/tsan.sh)
#   build-aarch64/         cross-built for aarch64, run under qemu-aarch64 (scripts/test-aarch64.sh)
#   build-fuzz/            clang + libFuzzer/ASan/UBSan, every harness in fuzz/ for 25 s
#                          (scripts/fuzz.sh 25; any finding fails)
#   .venv + build-python/  the Python package, pip-installed and tested (scripts/test-python.sh)
# Installs missing packages first. Exits non-zero if anything fails to build or any test
# fails (a test that runs past 900 s counts as failed). Run from anywhere; the build
# directories are created in the repository root. ROVE_JOBS / ROVE_CTEST_JOBS override
# the build and test parallelism.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${ROVE_JOBS:-$(nproc 2>/dev/null || echo 2)}
ctest_jobs=${ROVE_CTEST_JOBS:-2}

bash scripts/install-deps.sh

summaries=()
status=0

# run_suite <build dir> <cmake args...>
run_suite() {
  local dir=$1
  shift
  local t0=$SECONDS
  echo
  echo "==== $dir: configure ($*)"
  cmake -S . -B "$dir" "$@"
  echo "==== $dir: build"
  cmake --build "$dir" -j "$jobs"
  echo "==== $dir: ctest"
  local log="$dir/ctest-summary.log"
  local rc=0
  (cd "$dir" && ctest --output-on-failure -j "$ctest_jobs" --timeout 900) 2>&1 | tee "$log" || rc=$?
  local summary
  summary=$(grep -E 'tests passed|tests failed' "$log" | tail -n 1 || true)
  summaries+=("$dir: ${summary:-no ctest summary} ($((SECONDS - t0)) s)")
  if [ "$rc" -ne 0 ]; then
    status=1
  fi
}

run_suite build -DCMAKE_BUILD_TYPE=Release
run_suite build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROVE_SANITIZE=ON
# Portable: no SIMD kernels, no threads (the SIMD suites report themselves skipped).
run_suite build-portable -DCMAKE_BUILD_TYPE=Release -DROVE_ENABLE_SIMD=OFF -DROVE_ENABLE_THREADS=OFF
# The layer with Debian's OpenMP build of OpenBLAS (the default above is the pthread one).
bash scripts/install-deps.sh libopenblas-openmp-dev
run_suite build-openblas-openmp -DCMAKE_BUILD_TYPE=Release -DROVE_OPENBLAS_VARIANT=openmp -DROVE_BUILD_BENCH=OFF

# Debug (-O0 -Werror): built, its tests not run (they are the Release suites at -O0, slow);
# gcc warns at -O0 about things it does not at -O2 / -O3 (an unroll pragma it cannot
# apply), and a developer's Debug build must not stop on them.
echo
echo "==== build-debug: configure + build (Debug, -O0; tests not run)"
t0=$SECONDS
if cmake -S . -B build-debug -DCMAKE_BUILD_TYPE=Debug -DROVE_BUILD_BENCH=OFF &&
  cmake --build build-debug -j "$jobs"; then
  summaries+=("build-debug: built at -O0 -Werror, tests not run ($((SECONDS - t0)) s)")
else
  summaries+=("build-debug: FAILED to build ($((SECONDS - t0)) s)")
  status=1
fi

# run_script <build dir> <script> <regex of its summary line>: bash <script>, its last
# summary line (or FAILED) into the summaries.
run_script() {
  local dir=$1 script=$2 pattern=$3 t0=$SECONDS log
  echo
  echo "==== $dir: $script"
  log=$(mktemp)
  if bash "$script" 2>&1 | tee "$log"; then
    summaries+=("$dir: $(grep -E "$pattern" "$log" | tail -n 1) ($((SECONDS - t0)) s)")
  else
    summaries+=("$dir: FAILED ($script) ($((SECONDS - t0)) s)")
    status=1
  fi
  rm -f "$log"
}

# valgrind memcheck: a subset of the C suites with ROVE_ISA=scalar and the best ISA
# (build-valgrind/: RelWithDebInfo, threads on, no sanitizers; scripts/valgrind.sh).
run_script build-valgrind scripts/valgrind.sh '^valgrind: [0-9]+ suite runs clean'
# ThreadSanitizer: the threaded suites (build-tsan/; scripts/tsan.sh).
run_script build-tsan scripts/tsan.sh '^tsan: '

# The Python package: a venv (.venv) with torch/transformers/numpy/pytest from PyPI,
# `pip install .` (scikit-build-core builds librove into the package), pytest tests/python
# (NumPy/torch against float64 references, transformers models against their own
# attention); a skipped Python test counts as a failure.
echo
echo "==== python: scripts/test-python.sh"
t0=$SECONDS
py_log=$(mktemp)
if bash scripts/test-python.sh 2>&1 | tee "$py_log"; then
  summaries+=("python: $(grep -E '^[0-9]+ passed' "$py_log" | tail -n 1) ($((SECONDS - t0)) s)")
else
  summaries+=("python: FAILED (scripts/test-python.sh) ($((SECONDS - t0)) s)")
  status=1
fi
rm -f "$py_log"

# aarch64: cross-built, the whole suite under qemu-aarch64 (cortex-a53 and max CPUs).
echo
echo "==== build-aarch64: cross build + ctest under qemu (scripts/test-aarch64.sh)"
t0=$SECONDS
if bash scripts/test-aarch64.sh; then
  summaries+=("build-aarch64: passed under qemu, QEMU_CPU=cortex-a53 and max ($((SECONDS - t0)) s)")
else
  summaries+=("build-aarch64: FAILED (scripts/test-aarch64.sh)")
  status=1
fi

# libFuzzer: each harness of fuzz/ for 25 s from its committed seeds (scripts/fuzz.sh; 12
# harnesses, 2 at a time on 2 cores: ~2.5 min).
echo
echo "==== build-fuzz: scripts/fuzz.sh 25"
t0=$SECONDS
fz_log=$(mktemp)
if bash scripts/fuzz.sh 25 2>&1 | tee "$fz_log"; then
  summaries+=("build-fuzz: $(grep -cE '^fuzz_[a-z_]+ .* ok$' "$fz_log") harnesses x 25 s, no findings ($((SECONDS - t0)) s)")
else
  summaries+=("build-fuzz: FAILED (scripts/fuzz.sh 25) ($((SECONDS - t0)) s)")
  status=1
fi
rm -f "$fz_log"

echo
echo "==== summary"
for s in "${summaries[@]}"; do
  echo "$s"
done
if [ "$status" -ne 0 ]; then
  echo "FAILED"
else
  echo "all test suites passed"
fi
exit "$status"
