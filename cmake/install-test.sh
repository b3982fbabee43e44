#!/bin/sh
# SPDX-License-Identifier: MIT
# ctest install_and_example: install the build tree into a temporary prefix and use the
# installed copy the way a consumer would.
#
#   install-test.sh <build-dir> <examples-dir> <cmake> <c-compiler> <cross-compiling 0|1>
#
# 1. cmake --install <build-dir> --prefix <tmp>/prefix; the expected files are there
#    (librove.so -> .so.MAJOR.MINOR -> .so.MAJOR.MINOR.PATCH, rove.h, rove.pc,
#    roveConfig*.cmake, bin/rove).
# 2. pkg-config --cflags --libs rove works and the example builds with it.
# 3. The example builds with CMake: find_package(rove) + rove::rove (CMAKE_PREFIX_PATH).
#    The C example of ../README.md (first ```c block) builds and runs too.
# 4. Both programs run (LD_LIBRARY_PATH = installed lib dir) and print the same output;
#    examples/selective_gla runs and passes its own check;
#    the installed `rove info` runs (it finds the library through its RPATH).
# Exit 77 (skipped) when cross-compiling. ROVE_EXAMPLE_CFLAGS (from the environment) is
# added to the example's compile and link flags (the sanitizer build sets it).
set -eu

build=$1 examples=$2 cmake=$3 cc=$4 cross=$5
if [ "$cross" = 1 ]; then
  echo "cross-compiling: the installed package cannot be used on this host; skipped"
  exit 77
fi
cflags=${ROVE_EXAMPLE_CFLAGS:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rove-install-test.XXXXXX")
ok=0
cleanup() {
  if [ "$ok" = 1 ]; then rm -rf "$tmp"; else echo "install test: files kept in $tmp"; fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo; echo "== $*"; }

prefix=$tmp/prefix
step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix"

pc=$(find "$prefix" -name rove.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "rove.pc was not installed"
libdir=$(dirname "$(dirname "$pc")")
echo "lib dir: $libdir"
# the SONAME link: librove.so.<major>.<minor> while the major is 0 (CMakeLists.txt)
soname=$(objdump -p "$libdir/librove.so" | sed -n 's/^ *SONAME *//p')
case $soname in librove.so.0.[0-9]*) ;; *) fail "SONAME '$soname' is not librove.so.0.<minor>" ;; esac
for f in "$libdir/librove.so" "$libdir/$soname" "$prefix/include/rove.h" \
         "$libdir/cmake/rove/roveConfig.cmake" "$libdir/cmake/rove/roveConfigVersion.cmake" \
         "$libdir/cmake/rove/roveTargets.cmake"; do
  [ -e "$f" ] || fail "missing $f"
done
[ -L "$libdir/librove.so" ] || fail "librove.so is not a namelink"
[ -L "$libdir/$soname" ] || fail "$soname is not a symlink"
real=$(readlink "$libdir/$soname")
case $real in "$soname".*) ;; *) fail "$soname points to '$real'" ;; esac
[ -f "$libdir/$real" ] || fail "missing $libdir/$real"
ls -l "$libdir"/librove*

step "pkg-config"
PKG_CONFIG_PATH=$libdir/pkgconfig
export PKG_CONFIG_PATH
pkg-config --exists --print-errors rove || fail "pkg-config does not find rove"
pc_flags=$(pkg-config --cflags --libs rove) || fail "pkg-config --cflags --libs rove"
echo "pkg-config --cflags --libs rove: $pc_flags"
case " $pc_flags " in *" -lrove "*) ;; *) fail "no -lrove in '$pc_flags'" ;; esac
pc_inc=$(pkg-config --variable=includedir rove)
[ -f "$pc_inc/rove.h" ] || fail "pkg-config includedir '$pc_inc' has no rove.h"
pc_lib=$(pkg-config --variable=libdir rove)
[ -e "$pc_lib/librove.so" ] || fail "pkg-config libdir '$pc_lib' has no librove.so"
echo "version $(pkg-config --modversion rove)"

step "example via pkg-config"
# shellcheck disable=SC2086 # word splitting of the flags is intended
"$cc" -std=c11 -Wall -Wextra -Werror $cflags "$examples/hello_rove.c" -o "$tmp/hello_pc" \
  $pc_flags
echo "built $tmp/hello_pc"

readme=$examples/../README.md
if [ -f "$readme" ]; then
  step "the C example of README.md via pkg-config"
  awk '/^```c$/ {on = 1; next} on && /^```$/ {exit} on {print}' "$readme" > "$tmp/readme.c"
  [ -s "$tmp/readme.c" ] || fail "no \`\`\`c block in $readme"
  # shellcheck disable=SC2086
  "$cc" -std=c11 -Wall -Wextra -Werror $cflags "$tmp/readme.c" -o "$tmp/readme" $pc_flags
  LD_LIBRARY_PATH=$libdir "$tmp/readme" || fail "the README example exited non-zero"
fi

step "example via find_package(rove)"
# the example asks for no component: it must configure where MPI cannot be found, even
# with librove_mpi installed (CMAKE_DISABLE_FIND_PACKAGE_MPI makes MPI unfindable)
"$cmake" -S "$examples" -B "$tmp/build-example" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$cflags" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=TRUE
found=$(sed -n 's/^rove_DIR:PATH=//p' "$tmp/build-example/CMakeCache.txt")
[ "$found" = "$libdir/cmake/rove" ] || fail "find_package(rove) found '$found', not $libdir/cmake/rove"
"$cmake" --build "$tmp/build-example"

step "run both"
out_pc=$(LD_LIBRARY_PATH=$libdir "$tmp/hello_pc") || fail "hello_pc exited non-zero"
echo "$out_pc"
out_cm=$(LD_LIBRARY_PATH=$libdir "$tmp/build-example/hello_rove") || fail "hello_rove exited non-zero"
echo "$out_cm"
[ "$out_pc" = "$out_cm" ] || fail "the two builds of the example print different output"
LD_LIBRARY_PATH=$libdir "$tmp/build-example/selective_gla" || fail "selective_gla exited non-zero"

mpilib=$(find "$prefix" -name 'librove_mpi.so.*.*' | head -n 1)
if [ -n "$mpilib" ]; then
  step "installed librove_mpi finds librove beside it (RUNPATH \$ORIGIN)"
  readelf -d "$mpilib" | grep -q 'R.*PATH.*\$ORIGIN' || fail "$mpilib has no RUNPATH \$ORIGIN"
fi

if [ -x "$prefix/bin/rove" ]; then
  step "installed rove info"
  "$prefix/bin/rove" info || fail "installed rove info exited non-zero"
else
  fail "the rove tool was not installed to $prefix/bin"
fi

ok=1
echo
echo "install test passed"
