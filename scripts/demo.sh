#!/usr/bin/env bash
# demo.sh: install what is missing, build, and run numaaff's main demo: a short tour on this
# machine's topology, namely the capability report and topology (01_topology), a small numa_test
# table (jobs left to the kernel against jobs on the node-affine pool, under a message-passing
# disturbance) and an AMR phase change (block placement before and after, for first touch,
# interleave, move_to and next-touch). On a machine with one NUMA node it runs the same again
# inside the emulated 4-node VM, so the multi-node behaviour is visible; that part is emulation:
# its placements are real kernel placements, its timings mean nothing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$root/scripts/setup.sh"
build=$root/build/demo
build_config "$build" g++ 17 -DNUMAAFF_BUILD_TESTS=OFF -DNUMAAFF_BUILD_EXAMPLES=ON -DNUMAAFF_BUILD_BENCHMARKS=OFF >/dev/null
ex=$build/examples
numa_test_args=(--jobs-per-node 2 --mib 8 --passes 2)
amr_args=(--blocks 8 --cells 64 --steps 4 --phases 3)

echo "==== numaaff demo on this machine (real timings) ===="
"$ex/01_topology"
echo
"$ex/numa_test" "${numa_test_args[@]}"
"$ex/amr" "${amr_args[@]}"

nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
if [ "$nodes" -lt 2 ] && [ "${NUMAAFF_DEMO_VM:-1}" = 1 ]; then
    ensure_apt_lists
    echo
    echo "==== the same inside the emulated 4-node NUMA VM (QEMU, Linux 6.1) ===="
    echo "==== placements below are real kernel placements; timings are emulated and mean nothing ===="
    "$root/tests/vm/numaaff-vm" --add "$ex/01_topology" --add "$ex/numa_test" --add "$ex/amr" -- \
        sh -c "01_topology && echo && numa_test ${numa_test_args[*]} && amr ${amr_args[*]}"
fi
