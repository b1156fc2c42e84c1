# Debian packages from this project's install components (cmake --build BUILD --target package,
# configured with -DCMAKE_INSTALL_PREFIX=/usr so that libdir is Debian's multiarch directory):
#   libnumaaff-dev    component dev: the headers, the CMake package, numaaff.pc
#   libnumaaff-c0     component c: libnumaaff_c.so.0 and the I/O guard (named after the
#                     soname's version, as Debian policy 8.1 asks of a shared library package)
#   libnumaaff-c-dev  component c_dev: their link names, the Fortran modules, numaaff-c.pc,
#                     numaaff-fortran.pc and the c and fortran parts of the CMake package
#                     (Depends: a gfortran that reads the modules, as Debian's do)
#   numaaff-tools     component tools: numaaff-run, numaaff-top, numaaff-bench,
#                     numaaff-report-plot and their manual pages
# libnumaaff-dev is not Architecture: all: its CMake and pkg-config files live in the
# multiarch libdir, with the C parts, so that one CMAKE_PREFIX_PATH or PKG_CONFIG_PATH finds
# all of them (lintian refuses a triplet directory in an all package).
# Each package carries its copyright and a changelog (packaging/debian/) and, where lintian
# needs one, an override file whose comment says why the tag does not apply.
# Multi-Arch (written by packaging/debian/multiarch.cmake after CPack, which has no variable for
# it): libnumaaff-c0 and libnumaaff-dev are "same" (every file is in the multiarch libdir or is
# the same on every architecture: headers, documentation), so that the packages of two
# architectures install side by side; numaaff-tools is "foreign" (programs whose use does not
# depend on their architecture). libnumaaff-c-dev has none: its Fortran modules describe the
# C types of its architecture (size_t, pointers) and lie in /usr/include, shared by all.

# Whoever distributes the packages sets their own address here.
set(NUMAAFF_DEB_MAINTAINER "numaaff developers <numaaff@example.org>" CACHE STRING
    "Maintainer field of the Debian packages")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME numaaff)
set(CPACK_PACKAGE_VENDOR "the numaaff authors")
set(CPACK_PACKAGE_CONTACT "${NUMAAFF_DEB_MAINTAINER}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
# Empty: CPack would put the project's one-line description before each package's own
# synopsis (the first line of its description below), making that a second synopsis.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
# Each description: its synopsis, then paragraphs (CPack indents them and marks blank lines).
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/packages")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dev)
if(TARGET numaaff_c)
  list(APPEND CPACK_COMPONENTS_ALL c c_dev)
endif()
if(NUMAAFF_BUILD_TOOLS)
  list(APPEND CPACK_COMPONENTS_ALL tools)
endif()

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends of the ELF files from dpkg-shlibdeps
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(_deb_version "${PROJECT_VERSION}-1")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libnumaaff-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libhwloc-dev (>= 2.0), libnuma-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "libtbb-dev, libopenmpi-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION "header-only NUMA runtime for C++17
numaaff gives C++ programs the placement policies of a NUMA-aware kernel
without kernel changes: node-affine thread pools with homenode and node
policies, NUMA allocators and memory kinds, range policies with batched
migration, next-touch migration, and dataflow tasks placed by their data.

This package has the headers, the CMake package (find_package(numaaff))
and numaaff.pc. The oneTBB, OpenMP and MPI bridges need those libraries'
development packages.")

set(CPACK_DEBIAN_C_PACKAGE_NAME libnumaaff-c0)
set(CPACK_DEBIAN_C_PACKAGE_SECTION libs)
# The shlibs file for packages linking the libraries (CPack has no per-package form of this;
# the other packages have no shared library), and the ldconfig trigger Debian uses: CPack's
# postinst and postrm also call ldconfig (overridden in packaging/debian/libnumaaff-c0.lintian-overrides).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_C_PACKAGE_CONTROL_EXTRA "${PROJECT_SOURCE_DIR}/packaging/debian/triggers")
set(CPACK_COMPONENT_C_DESCRIPTION "NUMA runtime for C and Fortran - shared library
numaaff's C API: memory on NUMA nodes and by kind (a drop-in hbwmalloc),
next-touch migration, thread binding and live counters; and the opt-in I/O
guard, preloaded or linked, that makes libc's reads safe on memory armed for
next touch.")

set(CPACK_DEBIAN_C_DEV_PACKAGE_NAME libnumaaff-c-dev)
set(CPACK_DEBIAN_C_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_C_DEV_PACKAGE_DEPENDS "libnumaaff-dev (= ${_deb_version}), libnumaaff-c0 (= ${_deb_version})")
set(CPACK_COMPONENT_C_DEV_DESCRIPTION "NUMA runtime for C and Fortran - development files
The link names of numaaff's C library and I/O guard, the Fortran modules
numaaff and numaaff_omp (built with gfortran), numaaff-c.pc and
numaaff-fortran.pc, and the CMake components c and fortran
(find_package(numaaff COMPONENTS c fortran)).")
# The Fortran modules can be read only by a compiler of the module format that wrote them:
# Debian's gfortran-N packages provide gfortran-mod-V (V: that format), and Debian's packages
# of .mod files depend on "gfortran-N | gfortran-mod-V" (what dh_fortran_mod writes; e.g.
# libopenmpi-dev). V is read from a module this compiler writes, as dh_fortran_mod reads it.
if(TARGET numaaff_fortran AND NOT CMAKE_Fortran_COMPILER_ID STREQUAL "GNU")
  message(STATUS "numaaff: Fortran modules by ${CMAKE_Fortran_COMPILER_ID}: Debian knows only gfortran's "
          "module formats, the libnumaaff-c-dev package would not depend on a compiler that reads them")
elseif(TARGET numaaff_fortran)
  set(_probe "${PROJECT_BINARY_DIR}/packaging/fortran-mod-version")
  file(WRITE "${_probe}/probe.f90" "module numaaff_mod_version_probe\nend module\n")
  execute_process(COMMAND "${CMAKE_Fortran_COMPILER}" -c probe.f90 WORKING_DIRECTORY "${_probe}"
                  RESULT_VARIABLE _status OUTPUT_QUIET ERROR_QUIET)
  set(_mod_header "")
  if(_status EQUAL 0)
    execute_process(COMMAND gzip -dc numaaff_mod_version_probe.mod WORKING_DIRECTORY "${_probe}"
                    OUTPUT_VARIABLE _mod_header ERROR_QUIET)
  endif()
  if(_mod_header MATCHES "^GFORTRAN module version '([0-9]+)'")
    set(_mod_version "${CMAKE_MATCH_1}")
    string(REGEX MATCH "^[0-9]+" _gfortran_major "${CMAKE_Fortran_COMPILER_VERSION}")
    string(APPEND CPACK_DEBIAN_C_DEV_PACKAGE_DEPENDS ", gfortran-${_gfortran_major} | gfortran-mod-${_mod_version}")
  else()
    message(WARNING "numaaff: no module version read from a module ${CMAKE_Fortran_COMPILER} writes "
            "(${_probe}): the libnumaaff-c-dev package will not depend on a compiler that reads its .mod files")
  endif()
endif()

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME numaaff-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS "python3, gnuplot-nox | gnuplot")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "NUMA runtime tools: launcher, per-node top and machine report
numaaff-run runs a command with a homenode and a node policy (and with
--report, summarises what ran and moved on each node); numaaff-top shows each
node's CPU use, numaaff's tasks and steals, a process's memory and the page
migrations live; numaaff-bench measures the machine's NUMA latency and
bandwidth matrices, page migration, next touch and task costs beside oneTBB
and OpenMP; numaaff-report-plot draws a report as PNG.")

# /usr/share/doc/PACKAGE/{copyright,changelog.Debian.gz} and the lintian overrides, per package.
# The changelog's date is the last commit's (or SOURCE_DATE_EPOCH's), not the build's: the files
# of a Multi-Arch: same package outside the libdir must be the same bytes on every
# architecture, whenever each was built. Outside a git checkout, without SOURCE_DATE_EPOCH: now.
set(_deb_epoch "$ENV{SOURCE_DATE_EPOCH}")
if(_deb_epoch STREQUAL "")
  execute_process(COMMAND git -C "${PROJECT_SOURCE_DIR}" log -1 --format=%ct OUTPUT_VARIABLE _deb_epoch
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(_deb_epoch MATCHES "^[0-9]+$")
  set(_deb_saved_epoch "$ENV{SOURCE_DATE_EPOCH}")
  set(ENV{SOURCE_DATE_EPOCH} "${_deb_epoch}")
  string(TIMESTAMP _deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)  # string(TIMESTAMP) reads SOURCE_DATE_EPOCH
  set(ENV{SOURCE_DATE_EPOCH} "${_deb_saved_epoch}")
else()
  string(TIMESTAMP _deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
endif()
foreach(_component IN LISTS CPACK_COMPONENTS_ALL)
  string(TOUPPER "${_component}" _upper)
  set(_package "${CPACK_DEBIAN_${_upper}_PACKAGE_NAME}")
  set(_doc "${PROJECT_BINARY_DIR}/packaging/${_package}")
  configure_file("${PROJECT_SOURCE_DIR}/packaging/debian/changelog.in" "${_doc}/changelog.Debian" @ONLY)
  add_custom_command(OUTPUT "${_doc}/changelog.Debian.gz"
    COMMAND gzip -9nkf "${_doc}/changelog.Debian" DEPENDS "${_doc}/changelog.Debian" VERBATIM)
  list(APPEND _deb_changelogs "${_doc}/changelog.Debian.gz")
  # Only in the Debian package: CPack installs each component by itself, which takes files
  # EXCLUDE_FROM_ALL; a plain install (cmake --install, Spack's) leaves Debian's files out.
  install(FILES "${PROJECT_SOURCE_DIR}/packaging/debian/copyright" "${_doc}/changelog.Debian.gz"
          DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/doc/${_package}" COMPONENT ${_component} EXCLUDE_FROM_ALL)
  set(_overrides "${PROJECT_SOURCE_DIR}/packaging/debian/${_package}.lintian-overrides")
  if(EXISTS "${_overrides}")
    install(FILES "${_overrides}" DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides"
            RENAME "${_package}" COMPONENT ${_component} EXCLUDE_FROM_ALL)
  endif()
endforeach()
add_custom_target(numaaff_deb_changelogs ALL DEPENDS ${_deb_changelogs})

set(CPACK_NUMAAFF_MULTIARCH "libnumaaff-dev=same" "libnumaaff-c0=same" "numaaff-tools=foreign")
set(CPACK_POST_BUILD_SCRIPTS "${PROJECT_SOURCE_DIR}/packaging/debian/multiarch.cmake")

include(CPack)
