#!/usr/bin/env bash
# demo.sh: install what is missing, build, and run numaaff's main demo on this machine. On a
# machine with one NUMA node it runs the same demo again inside the emulated 4-node VM, so the
# multi-node behaviour is visible; that part is emulation (its timings mean nothing).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$root/scripts/setup.sh"
build=$root/build/demo
build_config "$build" g++ 17 -DNUMAAFF_BUILD_TESTS=OFF -DNUMAAFF_BUILD_EXAMPLES=ON >/dev/null

echo "==== numaaff demo on this machine ===="
"$build/examples/01_topology"

nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
if [ "$nodes" -lt 2 ] && [ "${NUMAAFF_DEMO_VM:-1}" = 1 ]; then
    ensure_apt_lists
    echo
    echo "==== the same demo inside the emulated 4-node NUMA VM (QEMU, kernel 6.1; emulated timings) ===="
    "$root/tests/vm/numaaff-vm" -- "$build/examples/01_topology"
fi
