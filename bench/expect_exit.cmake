# SPDX-License-Identifier: MIT
# cmake [-DEMU=emulator] -DEXE=program -DARGS="a;b" -DEXPECT=status -P expect_exit.cmake
# Passes when the program exits with status EXPECT (not by a signal, not with another code).
execute_process(COMMAND ${EMU} "${EXE}" ${ARGS} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc STREQUAL "${EXPECT}")
  message(FATAL_ERROR "${EXE} ${ARGS}: exit status '${rc}', expected ${EXPECT}\n${out}${err}")
endif()
