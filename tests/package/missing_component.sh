#!/bin/sh
# missing_component.sh CMAKE PREFIX WORK REQUEST_PROJECT LIBDIR CXX: find_package(numaaff
# COMPONENTS ...) against a copy of PREFIX without the C library's parts must fail and say
# which component is missing and what provides it; an unknown component must be named; the
# header-only part alone must still be found.
set -eu
cmake=$1 prefix=$2 work=$3 project=$4 libdir=$5 cxx=$6
rm -rf "$work"
mkdir -p "$work"
cp -a "$prefix" "$work/prefix"
rm -f "$work/prefix/$libdir/cmake/numaaff/numaaff-cTargets"*.cmake "$work/prefix/$libdir/cmake/numaaff/numaaff-fortranTargets"*.cmake
request() { # NAME COMPONENTS: configure the request project, its output in $work/NAME.log
    "$cmake" -S "$project" -B "$work/$1" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$work/prefix" \
        -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON "-DREQUEST=$2" >"$work/$1.log" 2>&1
}
expect_failure() { # NAME COMPONENTS MESSAGE
    if request "$1" "$2"; then
        echo "find_package(numaaff COMPONENTS $2) succeeded without the component"; cat "$work/$1.log"; exit 1
    fi
    # CMake wraps long messages: compare the text with its line breaks and indentation removed.
    if ! tr -s ' \n' ' ' <"$work/$1.log" | grep -qF "$3"; then
        echo "find_package(numaaff COMPONENTS $2): no '$3' in:"; cat "$work/$1.log"; exit 1
    fi
}
expect_failure c c "numaaff component 'c' is not installed in"
expect_failure c_dev_hint c "libnumaaff-c-dev"
expect_failure fortran fortran "numaaff component 'fortran' is not installed in"
expect_failure unknown "c;bogus" "numaaff has no component 'bogus' (it has: c fortran mpi)"
request header_only "" || { echo "the header-only part alone was not found:"; cat "$work/header_only.log"; exit 1; }
echo "missing and unknown components are named; the header-only part alone is found"
