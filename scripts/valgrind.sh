#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs a representative subset of the C suites under valgrind memcheck, once with
# ROVE_ISA=scalar and once with the best ISA of this CPU (capped at avx2 where that is
# AVX-512: valgrind 3.19 cannot run AVX-512 instructions), in a build without sanitizers:
#   scripts/valgrind.sh [build dir]      (default build-valgrind, RelWithDebInfo, threads on)
# A suite fails on any memcheck error (invalid read/write, uninitialised value used, bad
# free) and on definite or indirect leaks; "possibly lost" and "still reachable" blocks
# (librove's and OpenBLAS's thread pools live until exit) are not errors. Suppressions:
# scripts/valgrind.supp (each one explained there). Logs: <build dir>/valgrind/.
# Exits non-zero if anything fails. ROVE_JOBS: build parallelism and suites run at once.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
dir=${1:-build-valgrind}
jobs=${ROVE_JOBS:-2}

if ! command -v valgrind >/dev/null 2>&1; then
  bash scripts/install-deps.sh valgrind
fi

# The subset: suites that take at most a couple of minutes under memcheck (about 100x
# their native time) and together reach every public entry point family but GLA: bad
# input for every public function, rope frequencies, the KV cache (create, append, attention,
# shift, truncate), the layer (OpenBLAS, cached decode), Selective RoPE angles and the
# phase network (every option), the rope config fields, and attention with selective
# angles (prefill and cache, both kernels: tile and streaming rows). Measured on 2 shared
# cores, ROVE_ISA=scalar: test_bad_input 9 s, test_rope_freq 4 s, test_rope_fields 6 s,
# test_layer 20-49 s, test_kv_cache 73-144 s, test_selective 15 s, test_selective_phase
# 8 s, test_selective_attention 59-96 s. Left out as too slow here: test_gla 339 s,
# test_hostile_input 362 s, test_decode (5 s natively, the longest), test_attention
# (wall-clock times on a loaded machine; CPU time is about a third). The element types:
# test_attention_types (0.3 s natively) and test_kv_cache_types with its cut-down case set
# (ROVE_TEST_EMULATED=1, the one emulators run: 0.3 s natively instead of 2.2). The
# backward: test_attention_backward and test_gla_backward with their emulated case sets
# (0.1 and 0.3 s natively).
suites=(test_bad_input test_rope_freq test_rope_fields test_kv_cache test_layer test_selective
  test_selective_phase test_selective_attention test_attention_types test_kv_cache_types
  test_attention_backward test_gla_backward test_gla_varlen test_selective_packed test_merge
  test_varlen test_paged)

echo "==== valgrind: configure and build $dir"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROVE_SANITIZE=OFF \
  -DROVE_ENABLE_THREADS=ON -DROVE_BUILD_BENCH=OFF -DROVE_BUILD_TOOLS=OFF -DROVE_ENABLE_MPI=OFF >/dev/null
cmake --build "$dir" -j "$jobs" --target "${suites[@]}"

# The best ISA, as librove itself chooses it (natively, not under valgrind).
probe="$dir/valgrind-best-isa"
printf '#include "rove.h"\n#include <stdio.h>\nint main(void) { puts(rove_isa_name(rove_best_isa())); return 0; }\n' |
  cc -std=c11 -I include -x c - -o "$probe" -L "$dir" -lrove -Wl,-rpath,"$(cd "$dir" && pwd)"
best=$(env -u ROVE_ISA "$probe")
isas=(scalar)
case "$best" in
  scalar) ;;
  avx512)
    echo "valgrind: this CPU's best ISA is avx512, which valgrind cannot run: using avx2"
    isas+=(avx2)
    ;;
  *) isas+=("$best") ;;
esac
echo "valgrind: ISAs ${isas[*]}; suites ${suites[*]}"

logs="$dir/valgrind"
rm -rf "$logs"
mkdir -p "$logs"
vg=(valgrind --tool=memcheck --error-exitcode=1 --leak-check=full
  --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect
  --suppressions="$root/scripts/valgrind.supp" --num-callers=30 --gen-suppressions=all)

# run_one <suite> <isa>: one suite under valgrind; its result line goes to $logs/<..>.result
run_one() {
  local suite=$1 isa=$2 t0=$SECONDS rc=0
  local log="$logs/$suite.$isa.log"
  env ROVE_ISA="$isa" ROVE_TEST_REQUIRE_ISA="$isa" ROVE_SPIN_US=0 ROVE_TEST_EMULATED=1 \
    "${vg[@]}" --log-file="$log" "$dir/tests/$suite" >"$logs/$suite.$isa.out" 2>&1 || rc=$?
  local what=passed
  if [ "$rc" -eq 77 ]; then what="skipped (ISA not available)"; elif [ "$rc" -ne 0 ]; then what="FAILED (exit $rc, see $log)"; fi
  echo "$suite ROVE_ISA=$isa: $what ($((SECONDS - t0)) s)" >"$logs/$suite.$isa.result"
  cat "$logs/$suite.$isa.result"
}
# Up to $jobs suites at once (each is one process; ROVE_SPIN_US=0: idle workers sleep at once).
t0=$SECONDS
for isa in "${isas[@]}"; do
  for suite in "${suites[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    run_one "$suite" "$isa" &
  done
done
wait || true

status=0
runs=0
for isa in "${isas[@]}"; do
  for suite in "${suites[@]}"; do
    runs=$((runs + 1))
    r=$(cat "$logs/$suite.$isa.result" 2>/dev/null || echo "$suite ROVE_ISA=$isa: no result")
    case "$r" in *": passed "*) ;; *) status=1 ;; esac
  done
done
if [ "$status" -eq 0 ]; then
  echo "valgrind: $runs suite runs clean (ISAs ${isas[*]}) in $((SECONDS - t0)) s"
else
  echo "valgrind: FAILED:"
  grep -hv ": passed " "$logs"/*.result || true
fi
exit "$status"
