#!/usr/bin/env bash
# run_experiments.sh [--smoke] [OUT_DIR]: runs the classic experiments inside the emulated NUMA
# VM, keeps their CSV output and draws the plots of benchmarks/README.md (benchmarks/plot.sh):
#   numa02 and the AMR phases on 4 nodes x 1 CPU, numa01 on 2 nodes x 2 CPUs (its classic shape:
#   two processes, each ideally on its own node), the next-touch chunk-size sweep on 4 nodes.
# --smoke uses tiny sizes (CI checks that the whole chain works; its figures mean nothing).
# OUT_DIR defaults to benchmarks/results. VM timings are emulated: compare within one run only.
# Takes about 10 minutes (the numa_balancing runs need a few seconds of scanning each).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

smoke=0
if [ "${1:-}" = --smoke ]; then smoke=1; shift; fi
if [ $# -gt 1 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    echo "usage: $0 [--smoke] [OUT_DIR]" >&2
    exit 2
fi
out=${1:-$root/benchmarks/results}
mkdir -p "$out"
# NUMAAFF_BUILD_DIR: an existing build with examples and benchmarks (CI passes its own).
build=${NUMAAFF_BUILD_DIR:-$root/build/experiments}
if [ -z "${NUMAAFF_BUILD_DIR:-}" ]; then
    build_config "$build" g++ 17 -DNUMAAFF_BUILD_TESTS=OFF -DNUMAAFF_BUILD_BENCHMARKS=ON >/dev/null
fi
vm=$root/tests/vm/numaaff-vm
ex=$build/examples
bn=$build/benchmarks

if [ $smoke = 1 ]; then
    n02=(--mib 8 --passes 3); n01=(--mib 8 --passes 3); amr=(--blocks 4 --cells 32 --steps 2 --phases 2)
    chunk="--benchmark_filter='bm_next_touch_chunk/16/(32|128)/' --benchmark_min_time=0.01"
else
    n02=(--mib 64 --passes 150); n01=(--mib 64 --passes 150); amr=(--blocks 16 --cells 64 --steps 5 --phases 6)
    chunk="--benchmark_filter=bm_next_touch_chunk/16/ --benchmark_min_time=0.05 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true"
fi

# The guest's output is the program's stdout and stderr merged: keep the CSV rows only.
keep() { # TAG FILE
    grep -E "^$1," > "$2" || { echo "run_experiments.sh: no $1 rows" >&2; return 1; }
}
"$vm" --add "$bn/numa01_02" -- numa01_02 --test numa02 --csv "${n02[@]}" | keep numa02 "$out/numa02.csv"
"$vm" --nodes 2 --cpus-per-node 2 --add "$bn/numa01_02" -- numa01_02 --test numa01 --csv "${n01[@]}" | keep numa01 "$out/numa01.csv"
"$vm" --add "$ex/amr" -- amr --csv "${amr[@]}" | keep amr "$out/amr.csv"
"$vm" --add "$ex/amr" -- amr --csv --thp on "${amr[@]}" | keep amr "$out/amr_thp_on.csv"
# Google Benchmark's table: "bm_next_touch_chunk/MiB/pages/real_time[_median]  TIME ms ...".
"$vm" --add "$bn/bench_next_touch" -- sh -c "bench_next_touch --benchmark_color=false $chunk" >"$out/next_touch_chunk.log" || true
sed 's/\x1b\[[0-9;]*m//g' "$out/next_touch_chunk.log" |
    awk '$1 ~ /^bm_next_touch_chunk\/[0-9]+\/[0-9]+\/real_time(_median)?$/ && $3 == "ms" { split($1, f, "/"); print f[3] "," $2 }' \
    >"$out/next_touch_chunk.csv"
[ -s "$out/next_touch_chunk.csv" ] || { echo "run_experiments.sh: no chunk-size rows in $out/next_touch_chunk.log" >&2; exit 1; }
rm -f "$out/next_touch_chunk.log"
"$root/benchmarks/plot.sh" "$out"
