#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the libFuzzer harnesses (fuzz/, ROVE_BUILD_FUZZ=ON with clang, librove under
# ASan+UBSan) and run each for a fixed time on one thread, ROVE_JOBS (default nproc) of
# them at a time:
#   scripts/fuzz.sh [seconds per harness, default 300] [harness name regex, default all]
# CI (scripts/test.sh) runs `scripts/fuzz.sh 25`. Each harness starts from its committed
# seeds (fuzz/corpus/<name>/) plus what earlier runs found (<build>/corpus/<name>/, never
# the repository); a crash, leak, sanitizer report, violated invariant or timeout leaves
# its input in <build>/artifacts/<name>/ and fails the script. Prints execs/s and coverage
# (cov = edges, ft = features) per harness at the end. ROVE_FUZZ_BUILD overrides the build
# directory (build-fuzz), ROVE_JOBS the build parallelism and the harnesses run at once.
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

# One harness: its libFuzzer run and a one-line result in $build/fuzz-<name>.result
# (ending in "ok", or the FAILED verdict).
fuzz_one() {
  local name=$1 seeds=fuzz/corpus/$1 work=$build/corpus/$1 art=$build/artifacts/$1
  local log=$build/fuzz-$1.log rc=0 last cov ft execs eps found verdict=ok
  mkdir -p "$work" "$art"
  [ -d "$seeds" ] || seeds=
  "$build/fuzz/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$art/" "$work" $seeds \
    >"$log" 2>&1 || rc=$?
  # the last status line, e.g. "#123456 DONE cov: 812 ft: 2490 corp: 301/40Kb ..."
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
  eps=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -n 1)
  found=$(find "$art" -type f | head -n 5)
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    verdict="FAILED (rc $rc; see $log${found:+; inputs: $(echo $found)})"
  fi
  printf '%-24s %10s execs %7s execs/s  cov %6s  ft %7s  %s\n' "$name" "${execs:-?}" \
    "${eps:-?}" "${cov:-?}" "${ft:-?}" "$verdict" >"$build/fuzz-$name.result"
}

# The harnesses run $jobs at a time (each is one process on one thread): on 2 cores the
# 12 harnesses take 6 rounds of $seconds instead of 12.
names=()
while read -r name; do
  [ -n "$name" ] || continue
  [[ "$name" =~ $only ]] || continue
  names+=("$name")
  rm -f "$build/fuzz-$name.result"
done <"$build/fuzz/harnesses.txt"
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
echo "==== ${#names[@]} harnesses, ${seconds} s each, $jobs at a time"
# an interrupted run takes its harnesses down with it
trap 'kill $(jobs -p) 2>/dev/null; exit 130' INT TERM
for name in "${names[@]}"; do # as scripts/valgrind.sh: at most $jobs running
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$name" &
done
wait || true
trap - INT TERM
# the verdicts are in the .result files (a missing one: the harness's job itself failed)
status=0
results=()
for name in "${names[@]}"; do # each log's tail, in harness order once all have ended
  echo
  echo "==== $name: ${seconds} s (last lines of $build/fuzz-$name.log)"
  tail -n 20 "$build/fuzz-$name.log" 2>/dev/null || true
  if [ -f "$build/fuzz-$name.result" ]; then
    results+=("$(cat "$build/fuzz-$name.result")")
    [[ "${results[-1]}" == *" ok" ]] || status=1
  else
    results+=("$name: no result (the harness script itself failed)")
    status=1
  fi
done

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
