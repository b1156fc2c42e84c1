# FindNUMA: libnuma (numaif.h: mbind, move_pages, get_mempolicy) as the imported target
# NUMA::NUMA. Same approach as Findhwloc.cmake: pkg-config only as a hint.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_NUMA QUIET numa)
endif()
find_path(NUMA_INCLUDE_DIR NAMES numaif.h HINTS ${PC_NUMA_INCLUDE_DIRS})
find_library(NUMA_LIBRARY NAMES numa HINTS ${PC_NUMA_LIBRARY_DIRS})
set(NUMA_VERSION "${PC_NUMA_VERSION}")
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NUMA
  REQUIRED_VARS NUMA_LIBRARY NUMA_INCLUDE_DIR
  VERSION_VAR NUMA_VERSION)
if(NUMA_FOUND AND NOT TARGET NUMA::NUMA)
  add_library(NUMA::NUMA UNKNOWN IMPORTED)
  set_target_properties(NUMA::NUMA PROPERTIES
    IMPORTED_LOCATION "${NUMA_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NUMA_INCLUDE_DIR}")
endif()
mark_as_advanced(NUMA_INCLUDE_DIR NUMA_LIBRARY)
