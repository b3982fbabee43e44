# SPDX-License-Identifier: MIT
# rove_add_isa(<name> ARCH <processor regex> [FLAGS <flag>...] HEADER <header>
#              PROBE <C expression>)
#
# Adds the kernels of one SIMD ISA, the folder src/kernels/<name>/, to the library when
# CMAKE_SYSTEM_PROCESSOR matches ARCH, the folder has sources, and the compiler builds,
# with FLAGS, `#include <HEADER>` and a main returning (int)(PROBE) (an expression of the
# ISA's intrinsics; no semicolons, CMake would split the argument there). Then, in the caller's
# scope: the folder's sources are appended to ROVE_SOURCES (compiled with FLAGS, per
# file: the rest of the library stays baseline), ROVE_HAVE_<NAME>=1 to ROVE_ISA_DEFS, and
# <name> to ROVE_ISAS. An ISA the compiler cannot build is left out with a warning (the
# registry then reports it as not compiled in); one for another processor is skipped.
include(CheckCSourceCompiles)

function(rove_add_isa name)
  cmake_parse_arguments(A "" "ARCH;HEADER;PROBE" "FLAGS" ${ARGN})
  if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "${A_ARCH}")
    return()
  endif()
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/${name}/*.c)
  if(NOT srcs)
    return()
  endif()
  string(TOUPPER "${name}" upper)
  string(REPLACE ";" " " flags_str "${A_FLAGS}")
  set(CMAKE_REQUIRED_FLAGS "${flags_str}")
  set(CMAKE_REQUIRED_QUIET ON)
  check_c_source_compiles("#include <${A_HEADER}>\nint main(void) { return (int)(${A_PROBE}); }"
    ROVE_ISA_PROBE_${upper})
  if(NOT ROVE_ISA_PROBE_${upper})
    message(WARNING "librove: the compiler does not build ${name} code with '${flags_str}': "
      "the ${name} kernels are left out")
    return()
  endif()
  if(A_FLAGS)
    set_source_files_properties(${srcs} PROPERTIES COMPILE_OPTIONS "${A_FLAGS}")
  endif()
  set(ROVE_SOURCES ${ROVE_SOURCES} ${srcs} PARENT_SCOPE)
  set(ROVE_ISA_DEFS ${ROVE_ISA_DEFS} ROVE_HAVE_${upper}=1 PARENT_SCOPE)
  set(ROVE_ISAS ${ROVE_ISAS} ${name} PARENT_SCOPE)
endfunction()
