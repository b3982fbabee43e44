#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian/Ubuntu packages librove needs to build and test, and nothing else:
# only the missing ones are installed, and `apt-get update` runs only when something is
# missing. Non-interactive. Runs as root, or through sudo when it is available.
# Extra package names given as arguments are installed the same way.
set -euo pipefail

# clang with its runtimes (libFuzzer, ASan, UBSan): the fuzz build (scripts/fuzz.sh,
# ROVE_BUILD_FUZZ). No OpenMP: librove runs its own thread pool.
# Open MPI (libopenmpi-dev, openmpi-bin: mpicc, mpiexec): librove_mpi, its tests and
# bench/mpi_bench (docs/mpi.md); CMake builds them when it finds MPI.
packages=(build-essential cmake pkg-config libopenblas-dev libcmocka-dev libbenchmark-dev valgrind
  clang libclang-rt-dev libopenmpi-dev openmpi-bin "$@")

# Query the native architecture's copy (or the "all" one): with a foreign architecture
# added (arm64, see scripts/test-aarch64.sh) a plain name lists every architecture's copy.
arch=$(dpkg --print-architecture)
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}\n' "$p:$arch" "$p:all" 2>/dev/null | grep -x installed || true)
  if [ "$status" != "installed" ]; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present (${packages[*]})"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps: missing ${missing[*]}; run as root or install sudo" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "${missing[@]}"
