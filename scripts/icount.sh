#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instruction counts of fixed librove workloads under callgrind: repeatable to the last
# digit whatever else the machine does, so two builds can be compared on a noisy host.
#   scripts/icount.sh <build dir>... [-- <case> <isa value>]...
# e.g. scripts/icount.sh /tmp/old/build build -- prefill1024 2 decode_cache4096 2 setup 2
# Cases: bench/icount/work.c. Needs valgrind (apt-get install valgrind).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
builds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do builds+=("$(cd "$1" && pwd)"); shift; done
[ $# -gt 0 ] && shift
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(setup 2 prefill1024 2 decode4096 2 decode_cache4096 2 gla4096 2)
exe=$(mktemp)
trap 'rm -f "$exe"' EXIT
cc -O1 -std=c11 -I"$root/include" "$root/bench/icount/work.c" -o "$exe" -L"${builds[0]}" -lrove
for ((i = 0; i < ${#cases[@]}; i += 2)); do
  for b in "${builds[@]}"; do
    n=$(LD_LIBRARY_PATH=$b OMP_NUM_THREADS=1 valgrind --tool=callgrind \
      --callgrind-out-file=/dev/null "$exe" "${cases[i]}" "${cases[i+1]}" 2>&1 |
      sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
    printf '%-20s isa %s  %-40s %s\n' "${cases[i]}" "${cases[i+1]}" "$b" "$n"
  done
done
