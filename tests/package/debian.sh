#!/usr/bin/env bash
# debian.sh SOURCE BUILD_DIR: numaaff's Debian packages from a clean configure (prefix /usr,
# tests off), checked with lintian (every tag it raises must be fixed or overridden with a
# reason in packaging/debian/), installed with dpkg, used by the consumer projects with nothing
# but the installed packages (CMake with components, pkg-config; C++, C and Fortran; the
# installed tools and their manual pages), then removed: no file of theirs may be left. Their
# Depends are checked against what the files need, and shown to suffice on a minimal Debian 12
# where nothing else is installed (debian_fresh_root.sh, in BUILD_DIR/fresh-root).
# Needs root, the network to the Debian mirror and a machine where no numaaff package is
# installed: CI's fresh Debian 12.
set -euo pipefail
src=$(cd "$1" && pwd) b=$2
jobs=${NUMAAFF_JOBS:-$(nproc)}
packages=(numaaff-tools libnumaaff-c-dev libnumaaff-c0 libnumaaff-dev)
fail() { echo "debian.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root to install the packages with dpkg"
for p in "${packages[@]}"; do
    ! dpkg -s "$p" >/dev/null 2>&1 || fail "$p is installed already: this test installs and removes its own"
done
[ ! -e /usr/include/numaaff ] || fail "/usr/include/numaaff exists: a numaaff installed by hand would hide the packages' files"

# A fresh-root run killed before its trap ran leaves /proc and /sys mounted in BUILD_DIR:
# unmount them rather than remove files through them.
findmnt -rn -o TARGET | { grep "^$(realpath -m "$b")/" || true; } | sort -r | while read -r m; do umount "$m"; done
rm -rf "$b"
# Debian's build flags (hardening included; run from the source tree, whose path they map away).
flags() { (cd "$src" && DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get "$1"); }
cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr -DNUMAAFF_BUILD_TESTS=OFF \
    -DCMAKE_C_FLAGS="$(flags CFLAGS) $(flags CPPFLAGS)" -DCMAKE_CXX_FLAGS="$(flags CXXFLAGS) $(flags CPPFLAGS)" \
    -DCMAKE_Fortran_FLAGS="$(flags FFLAGS)" -DCMAKE_EXE_LINKER_FLAGS="$(flags LDFLAGS)" \
    -DCMAKE_SHARED_LINKER_FLAGS="$(flags LDFLAGS)" >/dev/null
cmake --build "$b" -j "$jobs" >/dev/null
(cd "$b" && cpack -G DEB >/dev/null)
mapfile -t debs < <(ls "$b"/packages/*.deb)
[ ${#debs[@]} -eq 4 ] || fail "expected 4 packages, got: ${debs[*]}"
for d in "${debs[@]}"; do
    echo "== $(basename "$d")"
    dpkg-deb --field "$d" Package Version Architecture Multi-Arch Depends Recommends | sed 's/^/   /'
done

# The Depends: each package depends on what its files need (the shared libraries' from
# dpkg-shlibdeps; the -dev packages' from packaging/debian.cmake).
deb_of() { printf '%s\n' "${debs[@]}" | grep "/$1_"; }
expect_depends() { # PACKAGE RELATION...: each RELATION ("pkg" or "a | b", versions aside) is among PACKAGE's Depends
    local p=$1 depends relations r
    shift
    depends=$(dpkg-deb --field "$(deb_of "$p")" Depends)
    relations=$(sed 's/ *([^)]*)//g; s/, */\n/g' <<<"$depends")
    for r in "$@"; do
        grep -qxE "$r" <<<"$relations" || fail "$p does not depend on $r (its Depends: $depends)"
    done
}
deb_version=$(dpkg-deb --field "$(deb_of libnumaaff-dev)" Version)
# The headers include hwloc.h and numaif.h; the CMake package and numaaff.pc find hwloc and libnuma.
expect_depends libnumaaff-dev libhwloc-dev libnuma-dev
expect_depends libnumaaff-c0 libc6 'libstdc[+][+]6' libhwloc15 libnuma1
# numaaff-bench links oneTBB and OpenMP when the build found them.
needed=$(objdump -p "$b/tools/numaaff-bench" | awk '$1 == "NEEDED" { print $2 }')
tools_depends=(libc6 'libstdc[+][+]6' libhwloc15 libnuma1)
if grep -qx 'libtbb[.]so[.]12' <<<"$needed"; then tools_depends+=(libtbb12); fi
if grep -qx 'libgomp[.]so[.]1' <<<"$needed"; then tools_depends+=(libgomp1); fi
expect_depends numaaff-tools "${tools_depends[@]}"
dpkg-deb --field "$(deb_of libnumaaff-c-dev)" Depends | grep -qF "libnumaaff-dev (= $deb_version), libnumaaff-c0 (= $deb_version)" ||
    fail "libnumaaff-c-dev does not depend on libnumaaff-dev and libnumaaff-c0 of its own version $deb_version"
# The Fortran modules: only a compiler of their module format reads them. Debian's gfortran-N
# provides gfortran-mod-V, and a package of .mod files depends on "gfortran-N | gfortran-mod-V"
# (as dh_fortran_mod writes it), V read from the files' header.
contents=$b/contents/libnumaaff-c-dev
mkdir -p "$contents"
dpkg-deb -x "$(deb_of libnumaaff-c-dev)" "$contents"
mapfile -t mods < <(find "$contents" -name '*.mod')
[ ${#mods[@]} -gt 0 ] || fail "libnumaaff-c-dev has no Fortran module (.mod) file"
for m in "${mods[@]}"; do
    v=$(gzip -dc "$m" | awk -F"'" 'NR == 1 && /^GFORTRAN module version/ { print $2 }')
    [ -n "$v" ] || fail "${m#"$contents"} is not a gfortran module file"
    expect_depends libnumaaff-c-dev "gfortran-[0-9]+ [|] gfortran-mod-$v"
done

# Multi-Arch (packaging/debian/multiarch.cmake): the field as packaging/debian.cmake says, and
# a "same" package holds nothing two architectures' copies could disagree on: every file is in
# the multiarch libdir, or is text under /usr/include or the package's own documentation and
# lintian directories (the same bytes on every architecture).
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
expect_multiarch() { # PACKAGE VALUE (dpkg reads a missing field as "no")
    local got
    got=$(dpkg-deb --field "$(deb_of "$1")" Multi-Arch)
    [ "$got" = "$2" ] || fail "$1 has Multi-Arch '$got', not '$2'"
}
expect_multiarch libnumaaff-dev same
expect_multiarch libnumaaff-c0 same
expect_multiarch numaaff-tools foreign
expect_multiarch libnumaaff-c-dev no
for p in libnumaaff-dev libnumaaff-c0; do
    contents=$b/contents/$p
    mkdir -p "$contents"
    dpkg-deb -x "$(deb_of "$p")" "$contents"
    while read -r f; do
        case "$f" in
            ./usr/lib/"$triplet"/*) continue ;;
            ./usr/include/* | ./usr/share/doc/"$p"/* | ./usr/share/lintian/overrides/"$p") ;;
            *) fail "$p is Multi-Arch: same but holds ${f#.} outside the multiarch libdir ($triplet)" ;;
        esac
        ! file -b "$contents/$f" | grep -q ELF || fail "$p is Multi-Arch: same but holds the binary ${f#.} in a shared directory"
    done < <(cd "$contents" && find . -type f -o -type l)
    # Nor may a shared file depend on when it was built: the changelog has the commit's date.
    if epoch=$(git -C "$src" log -1 --format=%ct 2>/dev/null) && [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
        want=$(LC_ALL=C date -u -R -d "@$epoch")
        gzip -dc "$contents/usr/share/doc/$p/changelog.Debian.gz" | grep -qF "  $want" ||
            fail "$p's changelog is not dated $want, the last commit's: two architectures' builds would differ"
    fi
done

# lintian: errors and warnings fail; the overrides in the packages explain what is accepted.
lintian --fail-on error,warning --display-info --no-tag-display-limit "${debs[@]}"

cleanup() { dpkg --purge "${packages[@]}" >/dev/null 2>&1 || true; }
trap cleanup EXIT
dpkg -i "${debs[@]}"
for p in "${packages[@]}"; do dpkg -L "$p"; done | sort -u >"$b/installed-files"

work=$b/consumers
mkdir -p "$work"
# CMake, the components by name, from /usr only (no hint where numaaff is).
mpi=OFF
command -v mpirun >/dev/null && mpirun --version 2>/dev/null | grep -q "Open MPI" && mpi=ON
ctest --build-and-test "$src/tests/package/components_consumer" "$work/cmake" --build-generator "Unix Makefiles" \
    --build-options -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DNUMAAFF_CONSUMER_MPI=$mpi \
    --test-command ctest --output-on-failure
grep -q '^numaaff_DIR:PATH=/usr/lib/.*/cmake/numaaff$' "$work/cmake/CMakeCache.txt" || fail "CMake did not find the packages' numaaff"
# pkg-config, as a Makefile does it: the default search path only.
c++ -std=c++17 "$src/tests/package/consumer/main.cpp" $(pkg-config --cflags --libs numaaff) -o "$work/pc_cxx"
cc "$src/tests/package/consumer/main.c" $(pkg-config --cflags --libs numaaff-c) -o "$work/pc_c"
gfortran "$src/tests/package/consumer/main.f90" $(pkg-config --cflags --libs numaaff-fortran) -o "$work/pc_fortran"
for p in pc_cxx pc_c pc_fortran; do "$work/$p" >/dev/null || fail "$p failed"; done
# The I/O guard preloads from the system's library directory.
LD_PRELOAD=libnumaaff_ioguard.so sh -c 'echo guarded' | grep -qx guarded || fail "the installed I/O guard does not preload"
# The tools: on the PATH, with their version, their manual pages.
version=$(sed -n 's/^Version: //p' /usr/lib/*/pkgconfig/numaaff.pc)
for t in numaaff-run numaaff-top numaaff-bench numaaff-report-plot; do
    [ "$(command -v "$t")" = "/usr/bin/$t" ] || fail "$t is not installed in /usr/bin"
    [ "$("$t" --version)" = "$t $version" ] || fail "$t --version says '$("$t" --version)', not '$t $version'"
    "$t" --help >/dev/null || fail "$t --help failed"
    man -w "$t" >/dev/null || fail "no manual page for $t"
done
numaaff-run --show | grep -q node || fail "numaaff-run --show"
numaaff-top --once --interval 0.2 >/dev/null || fail "numaaff-top --once"

trap - EXIT
dpkg --purge "${packages[@]}"
left=()
while read -r f; do
    [ -d "$f" ] && continue  # shared directories (/usr/bin) stay
    [ -e "$f" ] || [ -L "$f" ] && left+=("$f")
done <"$b/installed-files"
[ ${#left[@]} -eq 0 ] || fail "left after removal: ${left[*]}"
[ ! -e /usr/include/numaaff ] || fail "/usr/include/numaaff is left after removal"

# The Depends suffice: the same packages in a minimal Debian 12, with what apt brings only.
"$src/tests/package/debian_fresh_root.sh" "$b/packages" "$b/fresh-root"
echo "debian.sh: 4 packages built, their Depends checked, lintian clean, installed, used by CMake, pkg-config, C, C++, Fortran and the tools' users, removed without a trace; installed by apt in a minimal Debian 12 and purged"
