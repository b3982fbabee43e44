#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Turn rove_bench results into PNG plots (bench/plots/*.png) and markdown tables.
#
#   scripts/plot.sh [RESULTS.json [MEM.tsv]]
#
# Defaults: bench/results/latest.json and bench/results/latest-mem.tsv (mem_probe --tsv;
# optional). bench/report.py (python3, stdlib only) converts the JSON into gnuplot data
# files and prints the markdown tables (also written next to the JSON as .md); the
# bench/plots/*.gp scripts draw:
#   prefill_time.png    time vs n, RoVE and RoPE, log-log, with an n^2 slope
#   prefill_gflops.png  GFLOP/s vs n per ISA and thread count, with the FMA peaks
#   prefill_ratio.png   RoVE/RoPE time ratio vs n
#   decode_time.png     decode time vs cache length, with read-bandwidth bounds
#   memory.png          peak resident memory vs n (when the mem_probe TSV exists)
# Needs gnuplot (Debian: gnuplot-nox; scripts/bench.sh installs it when missing).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
json=${1:-bench/results/latest.json}
mem=${2:-bench/results/latest-mem.tsv}
out_dir=bench/plots

if [ ! -f "$json" ]; then
  echo "plot.sh: no results file $json (run scripts/bench.sh first)" >&2
  exit 1
fi
mem_args=()
if [ -f "$mem" ]; then
  mem_args=(--mem "$mem")
fi

data=$(mktemp -d "${TMPDIR:-/tmp}/rove-plot.XXXXXX")
trap 'rm -rf "$data"' EXIT

python3 bench/report.py "$json" --data-dir "$data" "${mem_args[@]}" \
  --markdown "${json%.json}.md"

if ! command -v gnuplot >/dev/null 2>&1; then
  echo "plot.sh: gnuplot not found: install gnuplot-nox (scripts/bench.sh does); no plots" >&2
  exit 1
fi
mkdir -p "$out_dir"
plots=(prefill_time prefill_gflops prefill_ratio decode_time gla_vs_softmax memory)
for plot in "${plots[@]}"; do
  rm -f "$out_dir/$plot.png" # a plot without data is skipped, not left stale
done
for plot in "${plots[@]}"; do
  gnuplot -e "DATA='$data'; OUT='$out_dir'; PLOTS='bench/plots'" "bench/plots/$plot.gp"
done
echo
echo "plot.sh: tables in ${json%.json}.md; plots:"
ls -1 "$out_dir"/*.png 2>/dev/null | sed 's/^/  /'
