# SPDX-License-Identifier: MIT
# rove_configure_pkgconfig(<in> <out>): configure rove.pc.in with a relocatable prefix.
#
# rove.pc is installed to <libdir>/pkgconfig. When CMAKE_INSTALL_LIBDIR is relative (the
# usual case) the prefix is written relative to the .pc file itself
# (prefix=${pcfiledir}/../..), so the file stays correct whatever prefix the tree is
# installed to, including `cmake --install <build> --prefix <dir>` at install time. When
# an install dir is absolute it is written as given.
function(rove_configure_pkgconfig in out)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(ROVE_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
    set(ROVE_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
  else()
    # "lib/pkgconfig" -> "../..", "lib/x86_64-linux-gnu/pkgconfig" -> "../../.."
    file(RELATIVE_PATH up "/rove-root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/rove-root")
    string(REGEX REPLACE "/+$" "" up "${up}")
    set(ROVE_PC_PREFIX "\${pcfiledir}/${up}")
    set(ROVE_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  endif()
  if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(ROVE_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
  else()
    set(ROVE_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
  endif()
  configure_file(${in} ${out} @ONLY)
endfunction()
