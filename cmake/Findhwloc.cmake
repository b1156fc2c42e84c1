# Findhwloc: hwloc 2 as the imported target hwloc::hwloc.
#
# Debian ships hwloc with a pkg-config file only, so pkg-config serves as a hint; the search
# itself is find_path/find_library, which also works without pkg-config or with
# -Dhwloc_ROOT=/custom/prefix.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_hwloc QUIET hwloc)
endif()
find_path(hwloc_INCLUDE_DIR NAMES hwloc.h HINTS ${PC_hwloc_INCLUDE_DIRS})
find_library(hwloc_LIBRARY NAMES hwloc HINTS ${PC_hwloc_LIBRARY_DIRS})
set(hwloc_VERSION "${PC_hwloc_VERSION}")
if(NOT hwloc_VERSION AND hwloc_INCLUDE_DIR AND EXISTS "${hwloc_INCLUDE_DIR}/hwloc/autogen/config.h")
  file(STRINGS "${hwloc_INCLUDE_DIR}/hwloc/autogen/config.h" _hwloc_version_line
       REGEX "^#define HWLOC_VERSION \"[^\"]+\"")
  string(REGEX REPLACE ".*\"([^\"]+)\".*" "\\1" hwloc_VERSION "${_hwloc_version_line}")
  unset(_hwloc_version_line)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(hwloc
  REQUIRED_VARS hwloc_LIBRARY hwloc_INCLUDE_DIR
  VERSION_VAR hwloc_VERSION)
if(hwloc_FOUND AND NOT TARGET hwloc::hwloc)
  add_library(hwloc::hwloc UNKNOWN IMPORTED)
  set_target_properties(hwloc::hwloc PROPERTIES
    IMPORTED_LOCATION "${hwloc_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${hwloc_INCLUDE_DIR}")
endif()
mark_as_advanced(hwloc_INCLUDE_DIR hwloc_LIBRARY)
