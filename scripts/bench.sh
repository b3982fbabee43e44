#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run librove's benchmark suite and regenerate its tables and plots:
#   1. install missing packages (scripts/install-deps.sh, plus gnuplot-nox for the plots)
#   2. build Release in build-bench/ (rove_bench, mem_probe)
#   3. rove_bench -> bench/results/<UTC date>.json and bench/results/latest.json
#   4. mem_probe  -> bench/results/<UTC date>-mem.tsv and bench/results/latest-mem.tsv
#   5. scripts/plot.sh -> bench/plots/*.png, markdown tables on stdout and in
#      bench/results/<UTC date>.md (a copy in bench/results/latest.md)
#
#   scripts/bench.sh [rove_bench flags...]     e.g. --benchmark_repetitions=3
#
# Environment: ROVE_BENCH_QUICK=1 (n <= 2048, caches <= 8k, 0.1 s per case: about a
# minute), ROVE_BENCH_BUILD_DIR (build-bench), and rove_bench's own variables
# (ROVE_BENCH_MAX_N, ROVE_BENCH_LOWER_MAX_N, ROVE_BENCH_SCALAR_MAX_N, ROVE_BENCH_MAX_KV,
# ROVE_BENCH_THREADS, ROVE_BENCH_ISAS; see bench/README.md). The machine should be idle:
# other processes on the cores show up directly in the numbers.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${ROVE_BENCH_BUILD_DIR:-build-bench}
jobs=${ROVE_JOBS:-$(nproc 2>/dev/null || echo 2)}
t_start=$SECONDS

bash scripts/install-deps.sh
if ! command -v gnuplot >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "bench.sh: gnuplot is missing; run as root or install gnuplot-nox" >&2
    exit 1
  fi
  echo "bench.sh: installing gnuplot-nox"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends gnuplot-nox
fi

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DROVE_BUILD_BENCH=ON
cmake --build "$build" -j "$jobs" --target rove_bench mem_probe

extra=()
if [ "${ROVE_BENCH_QUICK:-0}" = 1 ]; then
  export ROVE_BENCH_MAX_N=${ROVE_BENCH_MAX_N:-2048}
  export ROVE_BENCH_MAX_KV=${ROVE_BENCH_MAX_KV:-8192}
  extra=(--benchmark_min_time=0.1)
fi

stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
results=bench/results
mkdir -p "$results"
echo
echo "==== rove_bench -> $results/$stamp.json"
"$build/bench/rove_bench" --benchmark_filter=-smoke \
  --benchmark_out="$results/$stamp.json" --benchmark_out_format=json "${extra[@]}" "$@"
cp "$results/$stamp.json" "$results/latest.json"
t_suite=$((SECONDS - t_start))

echo
echo "==== mem_probe -> $results/$stamp-mem.tsv"
ns=() # up to ROVE_BENCH_MAX_N, but at least 1024 and 2048 (to show the growth)
for n in 1024 2048 4096 8192 16384; do
  if [ "$n" -le 2048 ] || [ "$n" -le "${ROVE_BENCH_MAX_N:-16384}" ]; then
    ns+=("$n")
  fi
done
"$build/bench/mem_probe" --tsv "${ns[@]}" | tee "$results/$stamp-mem.tsv"
cp "$results/$stamp-mem.tsv" "$results/latest-mem.tsv"

echo
echo "==== plots and tables"
bash scripts/plot.sh "$results/$stamp.json" "$results/$stamp-mem.tsv"
cp "$results/$stamp.md" "$results/latest.md"
echo
echo "bench.sh: done in $((SECONDS - t_start)) s (build + suite $t_suite s)"
