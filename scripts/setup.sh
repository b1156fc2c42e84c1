#!/usr/bin/env bash
# setup.sh: install what building and testing numaaff needs, from Debian 12 packages only.
# Runs apt-get as root, or through sudo. Quiet when everything is already there.
set -euo pipefail

packages=(
    # toolchains and build
    g++ clang libclang-rt-14-dev cmake make pkg-config
    # numaaff's dependencies
    libhwloc-dev libnuma-dev
    # tests, benchmarks, the TBB bridge
    libgtest-dev libgmock-dev libbenchmark-dev libtbb-dev numactl util-linux
    # OpenMP for clang++ (g++ brings libgomp): the OpenMP bridge and the benchmarks' baseline
    libomp-dev
    # the C API's Fortran module and its example; python3 compares the module with numaaff.h
    gfortran python3
    # the MPI bridge's tests and examples (Open MPI, also run inside the VM)
    openmpi-bin libopenmpi-dev
    # the emulated NUMA VM (tests/vm): qemu, a static busybox, kernel unpacking
    qemu-system-x86 busybox-static lz4 zstd xz-utils binutils apt-utils
    # the tiled Cholesky example's tile kernels (OpenBLAS and LAPACKE)
    libopenblas-dev liblapacke-dev
    # the allocators the heap by kind is measured against (bench_allocator under LD_PRELOAD),
    # and memkind's hbw example, built against numaaff's hbwmalloc.h in the VM layer
    libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4 libmemkind-dev
    # the plots of benchmarks/README.md (benchmarks/plot.sh)
    gnuplot-nox
    # numaaff-top's test drives it in a terminal as a person would
    tmux
    # the Debian packages (CPack: dpkg-shlibdeps, file), checked with lintian and installed in
    # a minimal Debian 12 root (debootstrap); the installed vars.sh in zsh and the modulefile
    # with environment-modules; the manual pages with man
    dpkg-dev file lintian debootstrap zsh environment-modules man-db
    # the documentation site (docs/: Doxygen, warnings are errors)
    doxygen
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ]; then
    as_root=()
elif command -v sudo >/dev/null; then
    as_root=(sudo)
else
    echo "setup.sh: these packages are missing and installing them needs root or sudo: ${missing[*]}" >&2
    exit 1
fi
echo "setup.sh: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
# the VM rig resolves kernel packages with apt-cache: the lists above are now current
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
