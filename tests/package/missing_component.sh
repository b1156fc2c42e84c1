#!/bin/sh
# missing_component.sh CMAKE PREFIX WORK REQUEST_PROJECT LIBDIR CXX: find_package(numaaff
# COMPONENTS ...) against a copy of PREFIX without the C library's parts must fail and say
# which component is missing and what provides it; an unknown component must be named; the
# header-only part alone must still be found; the mpi component without an MPI library must
# say what provides one.
set -eu
cmake=$1 prefix=$2 work=$3 project=$4 libdir=$5 cxx=$6
rm -rf "$work"
mkdir -p "$work"
cp -a "$prefix" "$work/prefix"
rm -f "$work/prefix/$libdir/cmake/numaaff/numaaff-cTargets"*.cmake "$work/prefix/$libdir/cmake/numaaff/numaaff-fortranTargets"*.cmake
request() { # NAME COMPONENTS [CMAKE OPTION...]: configure the request project, its output in $work/NAME.log
    name=$1 components=$2
    shift 2
    "$cmake" -S "$project" -B "$work/$name" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$work/prefix" \
        -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON "-DREQUEST=$components" "$@" >"$work/$name.log" 2>&1
}
expect_failure() { # NAME COMPONENTS MESSAGE [CMAKE OPTION...]
    name=$1 components=$2 message=$3
    shift 3
    if request "$name" "$components" "$@"; then
        echo "find_package(numaaff COMPONENTS $components) succeeded without the component"; cat "$work/$name.log"; exit 1
    fi
    # CMake wraps long messages: compare the text with its line breaks and indentation removed.
    if ! tr -s ' \n' ' ' <"$work/$name.log" | grep -qF "$message"; then
        echo "find_package(numaaff COMPONENTS $components): no '$message' in:"; cat "$work/$name.log"; exit 1
    fi
}
expect_failure c c "numaaff component 'c' is not installed in"
expect_failure c_dev_hint c "libnumaaff-c-dev"
expect_failure fortran fortran "numaaff component 'fortran' is not installed in"
# MPI is installed where this runs: the request is configured as if it were not.
expect_failure mpi mpi "numaaff component 'mpi': no MPI found: it needs an MPI library with C++ support (Debian: libopenmpi-dev)" \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
expect_failure unknown "c;bogus" "numaaff has no component 'bogus' (it has: c fortran mpi)"
request header_only "" || { echo "the header-only part alone was not found:"; cat "$work/header_only.log"; exit 1; }
echo "missing and unknown components are named, and what provides them; the header-only part alone is found"
