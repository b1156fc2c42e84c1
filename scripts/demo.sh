#!/usr/bin/env bash
# demo.sh: install what is missing, build, and run numaaff's main demo on this machine: the
# capability report and topology (01_topology), then placement, migration and next-touch
# (02_placement), and the node-affine thread pool (03_thread_pool). On a machine with one
# NUMA node it runs the same again inside the emulated 4-node VM, so the multi-node behaviour
# is visible; that part is emulation (its timings mean nothing, its placements are real).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$root/scripts/setup.sh"
build=$root/build/demo
build_config "$build" g++ 17 -DNUMAAFF_BUILD_TESTS=OFF -DNUMAAFF_BUILD_EXAMPLES=ON -DNUMAAFF_BUILD_BENCHMARKS=OFF >/dev/null
ex=$build/examples

echo "==== numaaff demo on this machine ===="
"$ex/01_topology"
echo
"$ex/02_placement" 16
echo
"$ex/03_thread_pool" 16

nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
if [ "$nodes" -lt 2 ] && [ "${NUMAAFF_DEMO_VM:-1}" = 1 ]; then
    ensure_apt_lists
    echo
    echo "==== the same demo inside the emulated 4-node NUMA VM (QEMU, Linux 6.1; emulated timings) ===="
    "$root/tests/vm/numaaff-vm" --add "$ex/01_topology" --add "$ex/02_placement" --add "$ex/03_thread_pool" -- \
        sh -c '01_topology && echo && 02_placement 16 && echo && 03_thread_pool 16'
fi
