#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the libFuzzer harnesses (fuzz/, ROVE_BUILD_FUZZ=ON with clang, librove under
# ASan+UBSan) and run each for a fixed time, one after the other, on one thread:
#   scripts/fuzz.sh [seconds per harness, default 300] [harness name regex, default all]
# CI (scripts/test.sh) runs `scripts/fuzz.sh 45`. Each harness starts from its committed
# seeds (fuzz/corpus/<name>/) plus what earlier runs found (<build>/corpus/<name>/, never
# the repository); a crash, leak, sanitizer report, violated invariant or timeout leaves
# its input in <build>/artifacts/<name>/ and fails the script. Prints execs/s and coverage
# (cov = edges, ft = features) per harness at the end. ROVE_FUZZ_BUILD overrides the build
# directory (build-fuzz), ROVE_JOBS the build parallelism.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${1:-300}
only=${2:-.}
build=${ROVE_FUZZ_BUILD:-build-fuzz}
jobs=${ROVE_JOBS:-$(nproc 2>/dev/null || echo 2)}

if ! command -v clang >/dev/null 2>&1; then
  bash scripts/install-deps.sh
fi

echo "==== $build: configure + build (clang, ROVE_BUILD_FUZZ=ON)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DROVE_BUILD_FUZZ=ON -DROVE_BUILD_TESTS=OFF \
  -DROVE_BUILD_TOOLS=OFF -DROVE_BUILD_BENCH=OFF -DROVE_ENABLE_MPI=OFF >/dev/null
cmake --build "$build" -j "$jobs"

# One thread everywhere: plans use n_threads = 1, and OpenBLAS must not spin up
# teams of their own (a short run must mean something: >= 1000 execs/s).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

status=0
results=()
while read -r name; do
  [ -n "$name" ] || continue
  [[ "$name" =~ $only ]] || continue
  seeds=fuzz/corpus/$name
  work=$build/corpus/$name
  art=$build/artifacts/$name
  log=$build/fuzz-$name.log
  mkdir -p "$work" "$art"
  [ -d "$seeds" ] || seeds=
  echo
  echo "==== $name: ${seconds} s"
  rc=0
  "$build/fuzz/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$art/" "$work" $seeds \
    >"$log" 2>&1 || rc=$?
  tail -n 20 "$log"
  # the last status line, e.g. "#123456 DONE cov: 812 ft: 2490 corp: 301/40Kb ..."
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
  eps=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -n 1)
  found=$(find "$art" -type f | head -n 5)
  verdict=ok
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    verdict="FAILED (rc $rc; see $log${found:+; inputs: $(echo $found)})"
    status=1
  fi
  results+=("$(printf '%-24s %10s execs %7s execs/s  cov %6s  ft %7s  %s' "$name" \
    "${execs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "$verdict")")
done <"$build/fuzz/harnesses.txt"

echo
echo "==== fuzz summary (${seconds} s per harness)"
for r in "${results[@]}"; do
  echo "$r"
done
if [ ${#results[@]} -eq 0 ]; then
  echo "no harness matched '$only'"
  status=1
fi
[ "$status" -eq 0 ] && echo "fuzz: no findings" || echo "fuzz: FAILED"
exit "$status"
