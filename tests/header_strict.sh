#!/bin/sh
# SPDX-License-Identifier: MIT
# rove.h compiles alone, as C99/C11 and C++11/17, with every warning as an error: gcc
# -Wall -Wextra -pedantic, and clang -Weverything (its -Wdocumentation checks the @param
# names against the declarations). A program's own strict flags must not trip on our
# header. Exit 77 (skipped) without clang; the gcc checks need CC / CXX (arguments).
#   header_strict.sh INCLUDE_DIR CC CXX
set -eu
inc=$1 cc=$2 cxx=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include "rove.h"\nint main(void) { return rove_default_threads() < 0; }\n' > "$tmp/h.c"
printf '#include "rove.h"\nint main() { return rove_default_threads() < 0; }\n' > "$tmp/h.cc"
for std in c99 c11; do
  "$cc" -std=$std -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$inc" "$tmp/h.c"
done
for std in c++11 c++17; do
  "$cxx" -std=$std -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$inc" "$tmp/h.cc"
done
if ! command -v clang >/dev/null 2>&1 || ! command -v clang++ >/dev/null 2>&1; then
  echo "header_strict: clang not found: its -Weverything check skipped"
  exit 77
fi
clang -std=c11 -Weverything -Werror -fsyntax-only -I"$inc" "$tmp/h.c"
clang++ -std=c++17 -Weverything -Wno-c++98-compat -Wno-c++98-compat-pedantic -Werror \
  -fsyntax-only -I"$inc" "$tmp/h.cc"
echo "header_strict: gcc, g++, clang and clang++ accept rove.h with warnings as errors"
