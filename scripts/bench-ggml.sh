#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# librove's cache decode beside ggml's flash_attn_ext at the same shapes, in one run:
#
#   scripts/bench-ggml.sh GGML_SOURCE_DIR [rounds]
#
# GGML_SOURCE_DIR is a checkout of https://github.com/ggml-org/ggml (not a Debian 12
# package, so this is not part of CI or of the README's set-up). Builds it into
# build-ggml/ (Release, -march=native, OpenMP), compiles bench/ggml/ggml_decode.c against
# it, then alternates, for `rounds` rounds (default 3):
#   - rove_bench's decode_cache rows (RoVE, f32 / bf16 / f16 / q8 caches; each row prints
#     its read reference and % of read);
#   - ggml_decode with an F32, F16 and Q8_0 cache,
# both at 1 x 4096 and 1 x 32768 keys x 12 heads x 64 (MHA) and 1 x 8192 and 1 x 32768 keys
# x 32 query heads : 8 KV heads x 128 (GQA), on 1 and 2 threads. Raw output goes to
# stdout; BENCHMARKS.md quotes the medians over rounds.
set -euo pipefail
src=${1:?usage: scripts/bench-ggml.sh GGML_SOURCE_DIR [rounds]}
rounds=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=build-ggml
cmake -S "$src" -B "$out/ggml" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=ON \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$out/ggml" -j"$(nproc)" >/dev/null
libdir=$(dirname "$(find -L "$out/ggml" -name 'libggml-cpu.so' | head -1)")
basedir=$(dirname "$(find -L "$out/ggml" -name 'libggml-base.so' | head -1)")
cc -O2 -std=c11 bench/ggml/ggml_decode.c -I"$src/include" -L"$libdir" -L"$basedir" \
  -Wl,-rpath,"$root/$libdir" -Wl,-rpath,"$root/$basedir" -lggml -lggml-cpu -lggml-base -lm \
  -o "$out/ggml_decode"

if [ ! -x build/bench/rove_bench ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target rove_bench >/dev/null
fi
isa=$(build/tools/rove info 2>/dev/null | sed -n 's/.*chosen ISA: *//p' || true)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus), librove ISA ${isa:-?}"
echo "ggml: $(git -C "$src" log -1 --format='%h %cd' 2>/dev/null || echo "$src")"

shapes=("4096 64 12 12" "32768 64 12 12" "8192 128 32 8" "32768 128 32 8")
i=${isa:-avx2} # rove_bench's rows of the ISA librove chooses
filter="decode_cache/$i/n:(4096|32768)/d:64/h:12/kvh:12/thr:(1|2)/causal:1/q:1/kv:|decode_cache/$i/n:(8192|32768)/d:128/h:32/kvh:8/thr:(1|2)/causal:1/q:1/kv:"
for r in $(seq 1 "$rounds"); do
  echo "==== round $r: librove"
  build/bench/rove_bench --benchmark_min_time=1.0 --benchmark_filter="$filter"
  echo "==== round $r: ggml"
  for s in "${shapes[@]}"; do
    for t in 1 2; do
      for ty in f32 f16 q8_0; do
        # shellcheck disable=SC2086
        OMP_NUM_THREADS=$t "$out/ggml_decode" $s "$ty" "$t" 40
      done
    done
  done
done
