# SPDX-License-Identifier: MIT
# Cross toolchain: aarch64 Linux (glibc) from a Debian 12 x86-64 host.
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#
# Needs gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu and qemu-user, plus the arm64
# multiarch packages the build links (dpkg --add-architecture arm64; libc6:arm64,
# libgomp1:arm64, libstdc++6:arm64, libcmocka-dev:arm64, libopenblas-dev:arm64, ...);
# scripts/test-aarch64.sh installs them. No sysroot: Debian's multiarch layout puts the
# arm64 libraries in /usr/lib/aarch64-linux-gnu and their CMake/pkg-config files beside
# them, which CMAKE_LIBRARY_ARCHITECTURE makes CMake search (before the plain lib dirs).
# CMAKE_FIND_ROOT_PATH is deliberately left unset: restricting it to
# /usr/aarch64-linux-gnu would hide those multiarch libraries.
#
# ctest runs every test program through qemu-aarch64 (binfmt_misc is usually not mounted
# in containers, so the programs cannot be executed directly). It is called with no -L:
# the arm64 dynamic loader and glibc come from libc6:arm64 in /lib/aarch64-linux-gnu, and
# mixing in the cross toolchain's copy (-L /usr/aarch64-linux-gnu) makes threaded programs
# hang. QEMU_CPU in the environment picks the emulated CPU (cortex-a53, max, ...).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(ROVE_CROSS_PREFIX aarch64-linux-gnu- CACHE STRING "Prefix of the cross tools")
set(CMAKE_C_COMPILER ${ROVE_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${ROVE_CROSS_PREFIX}g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# pkg-config (the install test, consumers): look at the arm64 .pc files only.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")

find_program(ROVE_QEMU_AARCH64 qemu-aarch64)
if(ROVE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${ROVE_QEMU_AARCH64})
else()
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
endif()
