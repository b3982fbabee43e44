# SPDX-License-Identifier: MIT
# Runtime options for the sanitizer build (ROVE_SANITIZE=ON). The code is compiled with
# -fno-sanitize-recover=all, so every UBSan report is already fatal; these options also
# make ASan/UBSan abort with a stack trace, keep leak checking on and turn on the stricter
# ASan checks. ctest reports any such run as failed.
set(ROVE_SANITIZER_ENV
  "ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1"
  "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
  "LSAN_OPTIONS=exitcode=23")

# Append ROVE_SANITIZER_ENV to the ENVIRONMENT of every test added so far in the calling
# directory (CMake < 3.28 cannot set test properties of another directory, so each
# directory with tests calls this at its end). Does nothing unless ROVE_SANITIZE is on.
function(rove_sanitizer_test_env)
  if(NOT ROVE_SANITIZE)
    return()
  endif()
  get_property(dir_tests DIRECTORY PROPERTY TESTS)
  if(dir_tests)
    set_property(TEST ${dir_tests} APPEND PROPERTY ENVIRONMENT ${ROVE_SANITIZER_ENV})
  endif()
endfunction()
