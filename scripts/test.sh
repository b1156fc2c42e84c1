#!/usr/bin/env bash
# test.sh: install what is missing, build numaaff in every supported configuration and run the
# whole test suite: host layer (g++ C++17, clang++ C++20, g++ C++20, clang++ C++17, and
# ASan+UBSan), then the multi-node layer inside the emulated NUMA VM on kernels 6.1 and 6.12.
# This is what CI runs (.ci/run).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$root/scripts/setup.sh"
ensure_apt_lists
b=$root/build
export GTEST_COLOR=no

run_host_layer() { # DIR
    (cd "$1" && ctest -LE vm --output-on-failure -j "$jobs")
}

echo "==== g++, C++17 (also registers the VM layer) ===="
build_config "$b/gcc-17" g++ 17 -DNUMAAFF_BUILD_BENCHMARKS=OFF -DNUMAAFF_VM_TESTS=ON
run_host_layer "$b/gcc-17"

echo "==== clang++, C++20 ===="
build_config "$b/clang-20" clang++ 20
run_host_layer "$b/clang-20"

echo "==== g++, C++20 and clang++, C++17 ===="
build_config "$b/gcc-20" g++ 20
run_host_layer "$b/gcc-20"
build_config "$b/clang-17" clang++ 17
run_host_layer "$b/clang-17"

echo "==== ASan + UBSan (clang++, C++17) ===="
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
build_config "$b/asan" clang++ 17 -DCMAKE_CXX_FLAGS="$sanitize" -DCMAKE_EXE_LINKER_FLAGS="$sanitize"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 run_host_layer "$b/asan"

echo "==== multi-node layer in the emulated NUMA VM (kernels 6.1 and 6.12) ===="
(cd "$b/gcc-17" && ctest -L vm --output-on-failure)
