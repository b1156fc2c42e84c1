# CPack post-build script (CPACK_POST_BUILD_SCRIPTS, packaging/debian.cmake): writes the
# Multi-Arch field into the Debian packages, which CPack's DEB generator of CMake 3.25 has no
# variable for. CPACK_NUMAAFF_MULTIARCH lists PACKAGE=VALUE pairs; a package not listed keeps
# the default (no field: "Multi-Arch: no"). Each listed .deb is unpacked with dpkg-deb, the field
# is added after Architecture, and the package is built again from the same files.

foreach(_deb IN LISTS CPACK_PACKAGE_FILES)
  if(NOT _deb MATCHES "\\.deb$")
    continue()
  endif()
  execute_process(COMMAND dpkg-deb --field "${_deb}" Package OUTPUT_VARIABLE _package
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _status)
  if(NOT _status EQUAL 0)
    message(FATAL_ERROR "multiarch.cmake: dpkg-deb cannot read ${_deb}")
  endif()
  set(_value "")
  foreach(_pair IN LISTS CPACK_NUMAAFF_MULTIARCH)
    if(_pair MATCHES "^${_package}=(.+)$")
      set(_value "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  if(_value STREQUAL "")
    continue()
  endif()
  set(_tree "${_deb}.tree")
  file(REMOVE_RECURSE "${_tree}")
  execute_process(COMMAND dpkg-deb --raw-extract "${_deb}" "${_tree}" RESULT_VARIABLE _status)
  if(NOT _status EQUAL 0)
    message(FATAL_ERROR "multiarch.cmake: dpkg-deb --raw-extract ${_deb} failed")
  endif()
  file(READ "${_tree}/DEBIAN/control" _control)
  if(_control MATCHES "\nMulti-Arch:")
    message(FATAL_ERROR "multiarch.cmake: ${_package} has a Multi-Arch field already")
  endif()
  string(REGEX REPLACE "(^|\n)(Architecture: [^\n]*\n)" "\\1\\2Multi-Arch: ${_value}\n" _control "${_control}")
  if(NOT _control MATCHES "\nMulti-Arch: ${_value}\n")
    message(FATAL_ERROR "multiarch.cmake: no Architecture field in ${_package}'s control file")
  endif()
  file(WRITE "${_tree}/DEBIAN/control" "${_control}")
  # CPack compresses with xz (CPACK_DEBIAN_COMPRESSION_TYPE); the files are root's, as CPack
  # writes them.
  execute_process(COMMAND dpkg-deb --root-owner-group -Zxz --build "${_tree}" "${_deb}"
                  OUTPUT_QUIET RESULT_VARIABLE _status)
  if(NOT _status EQUAL 0)
    message(FATAL_ERROR "multiarch.cmake: dpkg-deb --build ${_deb} failed")
  endif()
  file(REMOVE_RECURSE "${_tree}")
endforeach()
