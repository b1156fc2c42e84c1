#!/bin/sh
# environment.sh PREFIX WORK LIBDIR [MODULECMD]: the installed vars.sh and modulefile, from a
# copy of PREFIX moved to WORK (both find the prefix from where they are): after sourcing
# vars.sh in bash and zsh (and, with NUMAAFF_ROOT, in dash), or loading the module, the tools
# run from PATH, man finds their pages and the system's, pkg-config and CMake find numaaff
# there; sourcing twice adds nothing twice.
set -eu
prefix=$1 work=$2 libdir=$3 modulecmd=${4:-}
rm -rf "$work"
mkdir -p "$work"
cp -a "$prefix" "$work/moved"
moved=$(cd "$work/moved" && pwd -P)
vars=$moved/share/numaaff/env/vars.sh
# What a user's shell should see: printed one per line by the same commands in every shell.
probe='command -v numaaff-run; numaaff-run --version >/dev/null && echo runs; man -w numaaff-top; man -w ls >/dev/null && echo system-pages;
pkg-config --variable=prefix numaaff; echo "$CMAKE_PREFIX_PATH"; echo "$NUMAAFF_ROOT"'
expected="$moved/bin/numaaff-run
runs
$moved/share/man/man1/numaaff-top.1.gz
system-pages
$moved/$libdir/pkgconfig/../..
$moved
$moved"
normalize() { # absolute paths resolved (pkg-config's prefix is .../pkgconfig/../..)
    while IFS= read -r l; do case $l in /*) realpath -m "$l" ;; *) printf '%s\n' "$l" ;; esac; done
}
check() { # WHAT OUTPUT
    if [ "$(printf '%s\n' "$2" | normalize)" != "$(printf '%s\n' "$expected" | normalize)" ]; then
        echo "$1: expected"; echo "$expected"; echo "got"; echo "$2"; exit 1
    fi
    echo "$1: tools, manual pages, pkg-config and CMake see $moved"
}
clean_env="env -i PATH=/usr/bin:/bin HOME=$work"
check "bash, . vars.sh" "$($clean_env bash -c ". '$vars'; $probe")"
if command -v zsh >/dev/null; then
    check "zsh, . vars.sh" "$($clean_env zsh -c ". '$vars'; $probe")"
fi
check "dash, NUMAAFF_ROOT and . vars.sh" "$($clean_env NUMAAFF_ROOT="$moved" dash -c ". '$vars'; $probe")"
twice=$($clean_env bash -c ". '$vars'; . '$vars'; echo \"\$PATH\"")
[ "$twice" = "$moved/bin:/usr/bin:/bin" ] || { echo "sourced twice, PATH is $twice"; exit 1; }
echo "sourced twice: PATH $twice"
if [ -n "$modulecmd" ]; then
    check "module load" "$($clean_env bash -c "eval \"\$(tclsh '$modulecmd' sh use '$moved/share/numaaff/modulefiles')\" && eval \"\$(tclsh '$modulecmd' sh load numaaff)\" && $probe")"
fi
