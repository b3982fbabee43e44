# SPDX-License-Identifier: MIT
# Included by CMakeLists.txt when scikit-build-core builds the Python package (SKBUILD is
# set by `pip install .`; see pyproject.toml). The wheel gets librove's real file as
# rove/librove.so, next to rove/__init__.py, which loads it by absolute path
# (python/rove/_lib.py): no LD_LIBRARY_PATH, no system-wide librove. Its SONAME stays
# librove.so.0.<minor>; a library loaded by path does not need a file of that name. Wheels
# cannot hold symlinks, so the SONAME/namelink links are not installed (they would be
# two more copies). Only the COMPONENT python is installed into the wheel
# (install.components in pyproject.toml), so the C package's headers, CMake and
# pkg-config files stay out of site-packages.
# OpenBLAS (the layer's sgemm) remains a system library (libopenblas-dev, installed by
# scripts/install-deps.sh), found by the loader's search as for the `cmake --install`ed
# library. install(FILES) copies the build tree's file as it is, with the build RUNPATH
# CMake gave it (OpenBLAS's folder and an empty entry, room for an install-time rewrite,
# which makes the loader search the current directory): it is removed from the copy.
install(FILES $<TARGET_FILE:rove> DESTINATION rove RENAME librove.so COMPONENT python)
install(CODE "file(RPATH_REMOVE FILE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/rove/librove.so\")"
        COMPONENT python)
