# Shared by demo.sh and test.sh: where things are, and one way to configure and build.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

# build_config DIR COMPILER STD [cmake options...]: configure (once) and build one configuration.
build_config() {
    local dir=$1 cxx=$2 std=$3 cc=gcc
    shift 3
    [ "$cxx" = clang++ ] && cc=clang  # the C API's example is built by the same family
    # CC, not -DCMAKE_C_COMPILER: C is enabled after project(), and a reconfigure that sees the
    # C compiler "changed" (gcc against the cached /usr/bin/gcc) deletes the cache and the -D
    # options with it.
    CC=$cc cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
        -DCMAKE_CXX_STANDARD="$std" -DCMAKE_CXX_STANDARD_REQUIRED=ON -DCMAKE_CXX_EXTENSIONS=OFF "$@" >/dev/null
    cmake --build "$dir" -j "$jobs"
}

# apt-cache needs current lists to resolve the VM's kernel packages on a fresh machine.
ensure_apt_lists() {
    if ! apt-cache show linux-image-cloud-amd64 >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
    fi
}
