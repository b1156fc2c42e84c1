#!/usr/bin/env bash
# test.sh: install what is missing, build numaaff in every supported configuration and run the
# whole test suite: host layer (g++ C++17, clang++ C++20, g++ C++20, and clang++ C++17 with
# ASan+UBSan; every example and experiment program with tiny sizes; once more under a seccomp
# filter that denies the NUMA calls, as in a container), a bounded fuzzing stage (libFuzzer
# over every parser and the C API), the benchmarks and the experiments' CSV-to-plot chain,
# then the multi-node layer inside the emulated NUMA VM on kernels 6.1 and 6.12 (which also
# runs numa_test, amr and numa01_02 and checks their goals), and last, as root, the Debian
# packages built, checked with lintian, installed, used and removed, then installed by apt in a
# minimal Debian 12 root to show their Depends suffice (tests/package/debian.sh).
# This is what CI runs (.ci/run).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$root/scripts/setup.sh"
ensure_apt_lists
b=$root/build
export GTEST_COLOR=no

# Each stage's wall time, printed again at the end (CI keeps the tail of the output).
stages=()
stage_started=$SECONDS
stage() {
    [ ${#stages[@]} -gt 0 ] && stages[-1]+=" $((SECONDS - stage_started)) s"
    stage_started=$SECONDS
    stages+=("$1:")
    echo "==== $1 ===="
}
summary() {
    local rc=$?
    [ ${#stages[@]} -gt 0 ] && stages[-1]+=" $((SECONDS - stage_started)) s"
    echo "==== stage times (total ${SECONDS} s, exit $rc) ===="
    printf '  %s\n' "${stages[@]}"
}
trap summary EXIT
# The configurations that exist for their language standard and compiler, not for the
# optimiser, compile at -O1 without debug information: about 40% less compile time.
quick=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG")
# The configurations after the first run on this one-node host only: the multi-node tests,
# which would all skip here, are built and run in the VM by the first.
host_only=(-DNUMAAFF_NUMA_TESTS=OFF)

run_host_layer() { # DIR
    (cd "$1" && ctest -LE vm --output-on-failure -j "$jobs")
}

stage "g++, C++17 (also registers the VM layer, builds the benchmarks and the MPI bridge's tests)"
# Line tables only (-g1): backtraces keep their functions and lines, compiling takes 20% less.
build_config "$b/gcc-17" g++ 17 -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DNUMAAFF_BUILD_BENCHMARKS=ON -DNUMAAFF_VM_TESTS=ON -DNUMAAFF_MPI=ON
run_host_layer "$b/gcc-17"

stage "the host layer in a container: NUMA calls denied by a seccomp filter (EPERM)"
# Docker's default profile without CAP_SYS_NICE denies mbind, move_pages, get/set_mempolicy,
# migrate_pages and set_mempolicy_home_node: numaaff must degrade, and the tests assert how.
# The packaging tests (CMake and pkg-config consumers, installs) make no NUMA call: not again.
(cd "$b/gcc-17" && ./tests/numa_sandbox -- ctest -LE 'vm|package' --output-on-failure -j "$jobs")

stage "clang++, C++20"
build_config "$b/clang-20" clang++ 20 "${quick[@]}" -DNUMAAFF_BUILD_BENCHMARKS=OFF -DNUMAAFF_MPI=ON "${host_only[@]}"
run_host_layer "$b/clang-20"

stage "g++, C++20"
# The examples (the guide's too), the tools and the headers compiled one by one are C++20 in
# clang++ above, whose libstdc++ is this one's; here the library, its tests and the C API.
build_config "$b/gcc-20" g++ 20 "${quick[@]}" -DNUMAAFF_BUILD_BENCHMARKS=OFF -DNUMAAFF_BUILD_EXAMPLES=OFF \
    -DNUMAAFF_BUILD_TOOLS=OFF -DNUMAAFF_TEST_HEADERS=OFF "${host_only[@]}"
run_host_layer "$b/gcc-20"

# clang++ with C++17 is the sanitized configuration: it runs the whole host layer. It compiles
# at -O0 with line tables: instrumented code at -O1 takes almost three times as long to compile
# (27 s against 10 s for one test file), which the run's few extra seconds do not repay.
stage "ASan + UBSan (clang++, C++17)"
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# oneTBB loads its tbbbind plugin with RTLD_DEEPBIND, which the sanitizer runtime refuses
# (google/sanitizers#611): the TBB bridge is tested in the other configurations.
# The C API and its C example are sanitized too; gfortran's runtime is not clang's, so the
# Fortran module is built in the other configurations. C programs linking the sanitized C++
# library need UBSan's C++ runtime and libstdc++, which the C driver leaves out.
build_config "$b/asan" clang++ 17 -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only -DNDEBUG" -DCMAKE_CXX_FLAGS="$sanitize" -DCMAKE_C_FLAGS="$sanitize" \
    -DCMAKE_EXE_LINKER_FLAGS="$sanitize -fsanitize-link-c++-runtime -lstdc++" \
    -DCMAKE_SHARED_LINKER_FLAGS="$sanitize" -DNUMAAFF_BUILD_BENCHMARKS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_TBB=ON -DNUMAAFF_FORTRAN=OFF \
    -DNUMAAFF_TEST_HEADERS=OFF "${host_only[@]}"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 run_host_layer "$b/asan"

stage "ThreadSanitizer (clang++, C++17): next-touch, the allocators and the heap by kind, the thread pool, dataflow, the live counters"
tsan="-fsanitize=thread -fno-omit-frame-pointer"
cmake -S "$root" -B "$b/tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_STANDARD=17 \
    -DCMAKE_CXX_EXTENSIONS=OFF -DCMAKE_CXX_FLAGS="$tsan" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DCMAKE_EXE_LINKER_FLAGS="$tsan" -DNUMAAFF_BUILD_EXAMPLES=OFF -DNUMAAFF_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$b/tsan" -j "$jobs" --target test_next_touch test_next_touch_random test_allocator test_thread_pool test_dataflow test_dependences test_kind test_counters
# The two tests that arm gigabytes of address space are left out: TSan's shadow of them makes
# each of their 100,000+ faults slow enough to take many minutes.
TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1 die_after_fork=0" "$b/tsan/tests/test_next_touch" --gtest_brief=1 \
    --gtest_filter='-*CheckerboardBeyondMaxMapCount:*FourGiBArmedEveryOtherChunkTouched'
TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1 die_after_fork=0" "$b/tsan/tests/test_next_touch_random" --gtest_brief=1
TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1" "$b/tsan/tests/test_allocator" --gtest_brief=1
TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1" "$b/tsan/tests/test_thread_pool" --gtest_brief=1
TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1" "$b/tsan/tests/test_dataflow" --gtest_brief=1
TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1" "$b/tsan/tests/test_dependences" --gtest_brief=1
TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1 die_after_fork=0" "$b/tsan/tests/test_kind" --gtest_brief=1
TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1 die_after_fork=0" "$b/tsan/tests/test_counters" --gtest_brief=1

stage "fuzzing (clang libFuzzer with ASan and UBSan): the parsers and the C API, ${NUMAAFF_FUZZ_SECONDS:-40} s each"
cmake -S "$root" -B "$b/fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_STANDARD=17 \
    -DCMAKE_CXX_EXTENSIONS=OFF -DNUMAAFF_FUZZ=ON -DNUMAAFF_BUILD_TESTS=OFF -DNUMAAFF_BUILD_EXAMPLES=OFF \
    -DNUMAAFF_BUILD_BENCHMARKS=OFF -DNUMAAFF_BUILD_C_API=OFF >/dev/null
fuzzers=(fuzz_environment fuzz_topology fuzz_launcher_args fuzz_c_api fuzz_counters)
cmake --build "$b/fuzz" -j "$jobs" --target "${fuzzers[@]}"
fuzz_one() { # NAME: one fuzzer for its time, its log in $b/fuzz/NAME.log
    local f=$1 found
    found=$(mktemp -d)  # what this run adds; the repo's corpus is read only
    if ! LSAN_OPTIONS="suppressions=$root/fuzz/lsan.supp:print_suppressions=0" "$b/fuzz/fuzz/$f" -max_total_time="${NUMAAFF_FUZZ_SECONDS:-40}" -timeout=10 -rss_limit_mb=4096 \
            -artifact_prefix="$b/fuzz/$f-" -print_final_stats=1 "$found" "$root/fuzz/corpus/$f" >"$b/fuzz/$f.log" 2>&1; then
        tail -n 60 "$b/fuzz/$f.log"
        echo "fuzzing: $f failed; the input is in $b/fuzz/$f-*" >&2
        return 1
    fi
    echo "$f: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$b/fuzz/$f.log" | grep -o '[0-9]*$') runs, no failure"
    rm -rf "$found"
}
# A libFuzzer run uses one core: as many at once as there are cores.
running=()
for f in "${fuzzers[@]}"; do
    fuzz_one "$f" &
    running+=($!)
    if [ ${#running[@]} -ge "$jobs" ]; then
        for p in "${running[@]}"; do wait "$p"; done
        running=()
    fi
done
for p in "${running[@]}"; do wait "$p"; done

stage "benchmarks: smoke runs (tiny sizes; real figures are in benchmarks/README.md)"
bench=$b/gcc-17/benchmarks
smoke=(--benchmark_min_time=0.01 --benchmark_color=false)
# Every host section of benchmarks/README.md regenerated from tiny runs into a copy: each
# benchmark runs (under every allocator it is compared with) and prints its ratios.
"$root/benchmarks/report.py" --build "$b/gcc-17" --smoke --runs 1 --output "$b/benchmarks-README.smoke.md"
"$root/tests/vm/numaaff-vm" --add "$bench/bench_memory" --add "$bench/bench_next_touch" --add "$bench/bench_thread_pool" -- sh -c \
    "bench_memory ${smoke[*]} --benchmark_filter='move.*/4096/' >/dev/null && bench_next_touch ${smoke[*]} --benchmark_filter='/1/' >/dev/null && bench_thread_pool ${smoke[*]} --benchmark_filter='fork_join|fib' >/dev/null && echo 'benchmarks ran in the 4-node VM'"

stage "experiments: numa01/numa02, AMR and the chunk sweep in the VM, CSV to plots (tiny sizes)"
NUMAAFF_BUILD_DIR=$b/gcc-17 "$root/benchmarks/run_experiments.sh" --smoke "$b/experiments-smoke"

stage "multi-node layer in the emulated NUMA VM (kernels 6.1 and 6.12)"
(cd "$b/gcc-17" && ctest -L vm --output-on-failure)

stage "Debian packages: built by CPack, lintian, installed with dpkg, used by consumers, removed; their Depends in a minimal Debian 12"
if [ "$(id -u)" = 0 ]; then
    NUMAAFF_JOBS=$jobs "$root/tests/package/debian.sh" "$root" "$b/deb"
else
    echo "skipped: installing the packages with dpkg needs root (CI runs as root)"
fi
