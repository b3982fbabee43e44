# SPDX-License-Identifier: MIT
# cmake -DLIB=<librove.so> -DNM=<nm> -DHEADER=<rove.h> -P CheckExports.cmake
#
# Fails when librove.so exports a defined global symbol whose name does not start with
# rove_ (hidden visibility must keep every internal function and table inside), or when a
# function declared with ROVE_API in rove.h is not exported.
cmake_minimum_required(VERSION 3.18)
foreach(var LIB NM HEADER)
  if(NOT ${var})
    message(FATAL_ERROR "CheckExports.cmake: -D${var}=... is required")
  endif()
endforeach()

execute_process(COMMAND ${NM} -D --defined-only ${LIB}
  OUTPUT_VARIABLE nm_out ERROR_VARIABLE nm_err RESULT_VARIABLE nm_rc)
if(NOT nm_rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIB} failed (${nm_rc}): ${nm_err}")
endif()

# Linker-made markers some toolchains list among the dynamic symbols.
set(allowed_other _init _fini _edata _end __bss_start _DYNAMIC _GLOBAL_OFFSET_TABLE_)
string(REPLACE "\n" ";" lines "${nm_out}")
set(exported)
set(bad)
foreach(line IN LISTS lines)
  # "<address> <type> <name>[@@version]"; upper-case types are global. A (absolute) is
  # accepted only for the linker markers above.
  if(line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) ([^ @]+)")
    set(type "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
    if(NOT type MATCHES "^[A-Zuvw]$")
      continue()
    endif()
    if(name MATCHES "^rove_")
      list(APPEND exported ${name})
    elseif(NOT name IN_LIST allowed_other)
      list(APPEND bad "${type} ${name}")
    endif()
  endif()
endforeach()

file(READ ${HEADER} header)
string(REGEX MATCHALL "ROVE_API[^;(]*[ *]rove_[a-z0-9_]+[ ]*\\(" decls "${header}")
set(missing)
set(n_api 0)
foreach(decl IN LISTS decls)
  string(REGEX MATCH "rove_[a-z0-9_]+[ ]*\\($" fn "${decl}")
  string(REGEX REPLACE "[ ]*\\($" "" fn "${fn}")
  math(EXPR n_api "${n_api} + 1")
  if(NOT fn IN_LIST exported)
    list(APPEND missing ${fn})
  endif()
endforeach()

list(LENGTH exported n_exported)
message(STATUS "${LIB}: ${n_exported} rove_* symbols exported; ${n_api} ROVE_API functions in rove.h")
set(failed 0)
if(bad)
  string(REPLACE ";" "\n  " bad_text "${bad}")
  message(SEND_ERROR "symbols exported without the rove_ prefix:\n  ${bad_text}")
  set(failed 1)
endif()
if(missing)
  string(REPLACE ";" "\n  " missing_text "${missing}")
  message(SEND_ERROR "ROVE_API functions of rove.h not exported:\n  ${missing_text}")
  set(failed 1)
endif()
if(n_api EQUAL 0)
  message(SEND_ERROR "no ROVE_API declarations found in ${HEADER}")
  set(failed 1)
endif()
if(failed)
  message(FATAL_ERROR "export check failed")
endif()
