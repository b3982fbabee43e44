#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cross-build librove for aarch64 (Release, NEON kernels) and run the whole ctest suite
# under qemu-aarch64, twice:
#   QEMU_CPU=cortex-a53   NEON only (no fp16, no bf16, no SVE)
#   QEMU_CPU=max          every feature qemu emulates (fp16, bf16, SVE, ...)
# Installs what is missing first (cross compilers, qemu-user, the arm64 multiarch
# libraries), non-interactively; nothing is installed when everything is there.
# The build goes to build-aarch64/ in the repository root (cmake/aarch64-linux-gnu.cmake).
# Exits non-zero if anything fails to build, any test fails, or a NEON/scalar suite is
# skipped. Timings of emulated runs say nothing about performance on real hardware.
# ROVE_JOBS / ROVE_CTEST_JOBS override the build and test parallelism.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${ROVE_JOBS:-$(nproc 2>/dev/null || echo 2)}
ctest_jobs=${ROVE_CTEST_JOBS:-2}
dir=build-aarch64
t_start=$SECONDS

# ---- packages ---------------------------------------------------------------------------
host_packages=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user)
arm64_packages=(libc6 libstdc++6 libgomp1 libcmocka-dev libopenblas-dev libbenchmark-dev)

# installed PKG ARCH: whether that architecture's copy (or an "all" one) is installed. A plain
# name would list the copies of every architecture once arm64 is added.
installed() {
  local st
  st=$(dpkg-query -W -f='${db:Status-Status}\n' "$1:$2" "$1:all" 2>/dev/null || true)
  [ "$(printf '%s\n' "$st" | grep -cx installed)" -gt 0 ]
}
native=$(dpkg --print-architecture)

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  fi
fi
apt_do() {
  if [ "$(id -u)" -ne 0 ] && [ ${#as_root[@]} -eq 0 ]; then
    echo "test-aarch64: need root (or sudo) to run apt-get $*" >&2
    exit 1
  fi
  # Wait for a dpkg lock held by another apt run instead of failing at once.
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@"
}

bash scripts/install-deps.sh # host build tools (cmake, ...), as for the x86 build

missing=()
for p in "${host_packages[@]}"; do installed "$p" "$native" || missing+=("$p"); done
need_update=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "test-aarch64: dpkg --add-architecture arm64"
  "${as_root[@]}" dpkg --add-architecture arm64
  need_update=1
fi
for p in "${arm64_packages[@]}"; do installed "$p" arm64 || missing+=("$p:arm64"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test-aarch64: installing ${missing[*]}"
  need_update=1
fi
if [ "$need_update" = 1 ]; then
  apt_do update -q
fi
if [ ${#missing[@]} -gt 0 ]; then
  # Multi-Arch "same" packages must have equal versions on amd64 and arm64: apt upgrades
  # the amd64 copies where the arm64 ones are newer.
  apt_do install -y -q --no-install-recommends "${missing[@]}"
else
  echo "test-aarch64: all packages present (${host_packages[*]} ${arm64_packages[*]/%/:arm64})"
fi
t_install=$((SECONDS - t_start))

# ---- build ------------------------------------------------------------------------------
t0=$SECONDS
echo
echo "==== $dir: configure (cross, Release)"
cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DROVE_BUILD_BENCH=OFF
echo "==== $dir: build"
cmake --build "$dir" -j "$jobs"
t_build=$((SECONDS - t0))

# ---- tests under qemu -------------------------------------------------------------------
summaries=()
status=0
# Tests that may legitimately skip here: the install test cannot use an arm64 install.
# install_and_example: skipped when cross-compiling. test_thread_pool.fork: qemu-user
# asserts when a child forked from a threaded process creates threads (its limitation).
allowed_skips='^(install_and_example|test_thread_pool\.fork)$'
# tests/CMakeLists.txt runs every API suite plain (test_x) and under each ISA cap
# (test_x.isa_scalar, test_x.isa_neon). On aarch64 the plain run is the isa_neon run (NEON
# is baseline, so the best ISA is always neon; isa_neon also checks that it was chosen), so
# the plain duplicates are left out to keep the emulated run short, and so is
# test_thread_pool.spin0 (the pool's sleep/wake paths without spinning: the same code on
# every architecture, run natively by the x86 suites; slow under qemu). ROVE_AARCH64_ALL=1
# runs them too.
# The suites that check the API's own logic, whatever the kernels (thread limits, hostile
# and bad input, allocation failures, the thread pool), and the CLI's long runs (its
# GPT-2 demo and quick bench) run once under emulation: under cortex-a53 with the NEON
# table. Their scalar-capped reruns are left out (~180 s of emulated CPU).
# QEMU_CPU=max: librove's NEON kernels need nothing beyond baseline NEON (no kernel reads
# ROVE_CPU_FP16 / BF16 / SVE), so the attention, decode, GLA and property suites would run
# the same instructions as under cortex-a53 and are not rerun there. What does differ
# under max: librove's feature detection (checked below: it must report fp16, bf16 and
# sve there, and none of them under cortex-a53), OpenBLAS's core selection (the layer
# suites and the typed-attention / typed-cache suites that run projections through it),
# libc's string routines, and the half / 8-bit conversion paths (ktest_*, the typed-cache
# suites and the CLI's typed-cache demos). The scalar-capped reruns (*.isa_scalar) read
# no CPU feature and ran under cortex-a53 already (and natively on x86).
api='test_(thread_limits|hostile_input|bad_input|alloc_fail|thread_pool)'
same_as_a53='test_(attention|attention_backward|properties|decode|varlen|paged|gla|gla_backward|kv_cache)\.isa_neon|ktest_(softcap|gla)'
exclude=(-E "^(test_[A-Za-z0-9_]+|test_thread_pool\.spin0|${api}\.isa_scalar)$")
exclude_max=(-E "^(test_[A-Za-z0-9_]+|test_thread_pool\.spin0|[A-Za-z0-9_]+\.isa_scalar|${api}\.[a-z_0-9]+|${same_as_a53}|rove_cli\.(demo_n256|bench_quick))$")
if [ "${ROVE_AARCH64_ALL:-0}" = 1 ]; then exclude=(); exclude_max=(); fi

run_ctest() {
  local cpu=$1 t0=$SECONDS log="$dir/ctest-$1.log" rc=0 ex=("${exclude[@]}")
  if [ "$cpu" = max ]; then ex=("${exclude_max[@]}"); fi
  echo
  echo "==== $dir: ctest under qemu-aarch64, QEMU_CPU=$cpu"
  # OPENBLAS_CORETYPE (e.g. Haswell, set for the x86 host) would make the arm64 OpenBLAS
  # fall back to its generic kernels: unset it for these runs only.
  local info features
  info=$(env -u OPENBLAS_CORETYPE QEMU_CPU="$cpu" "$ROVE_QEMU" "$dir/tools/rove" info 2>&1 || true)
  printf '%s\n' "$info" | sed 's/^/  rove info: /'
  # The detected features, as rove info names them ("CPU features:    neon fp16 bf16 sve (0x...)").
  features=$(printf '%s\n' "$info" | sed -n 's/^CPU features: *\(.*\) (0x[0-9a-f]*)$/\1/p')
  local want="neon"
  if [ "$cpu" = max ]; then want="neon fp16 bf16 sve"; fi
  if [ "$features" != "$want" ]; then
    echo "test-aarch64: QEMU_CPU=$cpu: rove info reports CPU features '$features', expected '$want'"
    rc=1
  fi
  (cd "$dir" && env -u OPENBLAS_CORETYPE QEMU_CPU="$cpu" \
    ctest --output-on-failure -j "$ctest_jobs" --timeout 900 "${ex[@]}") 2>&1 | tee "$log" || rc=$?
  local summary skipped
  summary=$(grep -E 'tests passed|tests failed' "$log" | tail -n 1 || true)
  # "The following tests did not run:" lists skipped tests as "<n> - <name> (Skipped)".
  skipped=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (Skipped)$/\1/p' "$log" | grep -Ev "$allowed_skips" || true)
  if [ -n "$skipped" ]; then
    echo "test-aarch64: unexpected skips under QEMU_CPU=$cpu: $(echo $skipped)"
    rc=1
  fi
  # ctest keeps every test's output in LastTest.log (its console shows failures only).
  if ! grep -q 'neon   compiled in and available' "$dir/Testing/Temporary/LastTest.log"; then
    echo "test-aarch64: ktest_kernels did not test the NEON table under QEMU_CPU=$cpu"
    rc=1
  fi
  summaries+=("QEMU_CPU=$cpu: ${summary:-no ctest summary} ($((SECONDS - t0)) s emulated)")
  if [ "$rc" -ne 0 ]; then status=1; fi
}

ROVE_QEMU=$(command -v qemu-aarch64)
t0=$SECONDS
run_ctest cortex-a53
run_ctest max
t_test=$((SECONDS - t0))

echo
echo "==== summary (aarch64 under qemu; emulated times are not performance figures)"
for s in "${summaries[@]}"; do echo "$s"; done
echo "install ${t_install} s, build ${t_build} s, tests ${t_test} s, total $((SECONDS - t_start)) s"
if [ "$status" -ne 0 ]; then
  echo "FAILED"
else
  echo "aarch64 test suites passed"
fi
exit "$status"
