#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ThreadSanitizer over the suites that run threaded calls (librove's own thread pool,
# src/threads.c, and every parallel phase behind it):
#   scripts/tsan.sh [build dir]      (default build-tsan: RelWithDebInfo, -fsanitize=thread)
# Any data race report fails the suite (halt_on_error). TSan cannot follow threads created
# after a multi-threaded fork, which test_thread_pool's fork test does: die_after_fork=0
# lets the child go on (the child's pool is still checked for its results). ASan and TSan
# cannot be combined, so this is a build of its own. ROVE_JOBS overrides the parallelism.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
dir=${1:-build-tsan}
jobs=${ROVE_JOBS:-$(nproc 2>/dev/null || echo 2)}
suites=(ktest_threads test_thread_pool test_properties test_decode test_kv_cache test_gla test_layer
  test_selective_attention test_kv_cache_types test_attention_types test_attention_backward
  test_gla_backward test_gla_varlen test_paged)

cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS=-fsanitize=thread \
  -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread -DROVE_BUILD_BENCH=OFF \
  -DROVE_BUILD_TOOLS=OFF -DROVE_ENABLE_MPI=OFF >/dev/null
cmake --build "$dir" -j "$jobs" --target "${suites[@]}" rove_dlclose_copy

export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:die_after_fork=0:second_deadlock_stack=1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}
fails=0
for s in "${suites[@]}"; do
  t0=$SECONDS
  rc=0
  "$dir/tests/$s" >"$dir/$s.tsan.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "$s: passed, no race ($((SECONDS - t0)) s)"
  else
    echo "$s: FAILED (exit $rc; $dir/$s.tsan.log)"
    grep -A20 "WARNING: ThreadSanitizer" "$dir/$s.tsan.log" | head -40 || true
    fails=$((fails + 1))
  fi
done
if [ "$fails" -ne 0 ]; then
  echo "tsan: $fails of ${#suites[@]} suites FAILED"
  exit 1
fi
echo "tsan: ${#suites[@]} suites clean"
