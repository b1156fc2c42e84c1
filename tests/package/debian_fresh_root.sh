#!/usr/bin/env bash
# debian_fresh_root.sh DEB_DIR WORK_DIR: numaaff's four Debian packages (the .deb files in
# DEB_DIR, built by debian.sh) installed by apt into a minimal Debian 12 (debootstrap
# --variant=minbase bookworm, from the Debian mirror this machine's apt uses), where nothing
# of what the packages need is present: apt must find all of it through their Depends
# (Recommends are not installed). First the runtime packages alone (numaaff-tools,
# libnumaaff-c0): every ELF file they ship finds its libraries, the tools run, the I/O guard
# preloads. Then the -dev packages: the headers' own dependencies (hwloc.h, numa.h, ...) and
# their pkg-config files are there, and the C and Fortran consumers build with the compilers
# the Depends brought (gfortran-N, for the .mod files, and its gcc-N) and run. Last, apt purges
# the four packages: none may leave a file.
# The C++ consumers are not built here: no Depends brings g++ (a -dev package of a C++
# header library does not depend on a compiler: Debian's libboost-dev does not either), it
# would add about 50 MB to the root, and debian.sh builds every consumer (CMake and
# pkg-config; C++, C and Fortran) against the packages installed on the host.
# The debootstrapped root is kept in WORK_DIR/minbase.tar for the next run in the same
# WORK_DIR (remove it to debootstrap again); a failed run leaves its root in WORK_DIR/root.
# Needs root (debootstrap, chroot, mount) and the network to the Debian mirror.
set -euo pipefail
SECONDS=0
debs_dir=$(cd "$1" && pwd)
mkdir -p "$2"
work=$(cd "$2" && pwd)
root=$work/root
packages=(numaaff-tools libnumaaff-c-dev libnumaaff-c0 libnumaaff-dev)
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "debian_fresh_root.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot and mount)"
mapfile -t debs < <(ls "$debs_dir"/*.deb)
[ ${#debs[@]} -eq 4 ] || fail "expected the 4 packages in $debs_dir, got: ${debs[*]}"

# The Debian suites this machine's apt uses, as "URI SUITE" (one-line and deb822 sources;
# other archives, such as a vendor's, are not Debian's and are left out).
debian_suites() {
    { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
        sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) \(bookworm[^ ]*\) .*/\2 \3/p'
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        awk 'BEGIN { RS = "" }
        {
            types = uris = suites = ""; enabled = 1
            n = split($0, line, "\n")
            for (i = 1; i <= n; i++) {
                if (line[i] ~ /^Types:/) types = substr(line[i], 7)
                else if (line[i] ~ /^URIs:/) uris = substr(line[i], 6)
                else if (line[i] ~ /^Suites:/) suites = substr(line[i], 8)
                else if (line[i] ~ /^Enabled: *no/) enabled = 0
            }
            if (!enabled || (" " types " ") !~ / deb /) next
            nu = split(uris, u, " "); ns = split(suites, s, " ")
            for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++) if (s[b] ~ /^bookworm/) print u[a], s[b]
        }' "$f"
    done
}
mapfile -t suites < <(debian_suites | sort -u)
mirror=$(printf '%s\n' "${suites[@]}" | awk '$2 == "bookworm" { print $1; exit }')
[ -n "$mirror" ] || fail "no Debian bookworm mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/"

command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
    fail "debootstrap is not installed and apt-get could not install it"

# /proc and /sys are mounted in the root while it is used, and unmounted on every way out
# (also those of an earlier run killed before its trap ran: never remove a root through them).
unmount_all() {
    local m
    findmnt -rn -o TARGET | { grep "^$root/" || true; } | sort -r | while read -r m; do umount "$m" || umount -l "$m"; done
}
trap unmount_all EXIT
trap 'exit 130' INT TERM HUP
unmount_all
rm -rf --one-file-system "$root"
mkdir -p "$root"
if [ -s "$work/minbase.tar" ]; then
    tar -C "$root" -xpf "$work/minbase.tar"
    echo "== minimal Debian 12 root from $work/minbase.tar (debootstrapped from $mirror earlier)"
else
    echo "== debootstrap --variant=minbase bookworm from $mirror"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
        tail -n 30 "$work/debootstrap.log" >&2
        fail "debootstrap from $mirror failed (it needs the network to that mirror): see $work/debootstrap.log"
    }
    tar -C "$root" -cf "$work/minbase.tar.part" . && mv "$work/minbase.tar.part" "$work/minbase.tar"
    echo "   $(du -smx "$root" | cut -f1) MB, ${SECONDS} s"
fi
# The same Debian suites as this machine (bookworm, and its updates and security if it uses them).
for s in "${suites[@]}"; do echo "deb $s main"; done >"$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
inroot() {
    chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}
apt=(apt-get -y -q -o Dpkg::Use-Pty=0)  # no /dev/pts in the root: dpkg's output without a pty
for p in "${packages[@]}" libhwloc15 libnuma1 libhwloc-dev libnuma-dev gcc-12; do
    ! inroot dpkg -s "$p" >/dev/null 2>&1 || fail "$p is in the minimal root already: it cannot show what the Depends bring"
done
[ ! -e "$root/usr/include/hwloc.h" ] && [ ! -e "$root/usr/include/numa.h" ] || fail "the minimal root has hwloc.h or numa.h already"

# apt installs the packages from the files and what their Depends name from the mirror, in
# two steps: the runtime packages alone first (a user of the tools or of a program linked with
# the C library installs no -dev package, whose own dependencies would hide a missing one),
# then the -dev packages.
mkdir -p "$root/tmp/numaaff-debs"
cp "${debs[@]}" "$root/tmp/numaaff-debs/"
chmod -R a+rX "$root/tmp/numaaff-debs"  # apt's _apt user reads them
inroot "${apt[@]}" update >"$work/apt-update.log" 2>&1 || { cat "$work/apt-update.log" >&2; fail "apt-get update from $mirror failed"; }
apt_install() { # LOG PACKAGE...: apt installs the packages' files in the root, with their Depends only
    local log=$work/$1 before added p f files=()
    shift
    for p in "$@"; do
        f=("$root"/tmp/numaaff-debs/"$p"_*.deb)
        files+=("${f[0]#"$root"}")
    done
    before=$(inroot dpkg-query -W -f '${Package}\n' | wc -l)
    if ! inroot "${apt[@]}" install --no-install-recommends "${files[@]}" >"$log" 2>&1; then
        cat "$log" >&2
        fail "apt could not install $* in a minimal Debian 12: a Depends names what bookworm does not have (apt's reason above)"
    fi
    for p in "$@"; do
        [ "$(inroot dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null)" = installed ] ||
            fail "$p is not installed in the root: $(inroot dpkg -s "$p" 2>&1 | grep -m1 Status)"
        inroot dpkg -L "$p" >>"$work/installed-files"  # for the purge below
    done
    added=$(( $(inroot dpkg-query -W -f '${Package}\n' | wc -l) - before - $# ))
    echo "== apt installed $* and $added packages of Debian's that their Depends name ($(sed -n 's|^Need to get \([^/]*\).*|\1|p' "$log") downloaded), ${SECONDS} s"
    [ "$added" -gt 12 ] || sed -n '/^The following NEW packages/,/^[^ ]/ s/^  /   /p' "$log"
}
: >"$work/installed-files"
apt_install apt-install-runtime.log numaaff-tools libnumaaff-c0

# Each ELF file (programs and shared libraries) finds every library it needs.
elves=0
while read -r f; do
    [ -f "$root$f" ] && [ ! -L "$root$f" ] && [ "$(od -An -c -N 4 "$root$f" | tr -d ' ')" = '177ELF' ] || continue
    elves=$((elves + 1))
    out=$(inroot ldd "$f" 2>&1) || fail "ldd $f failed in the root: $out"
    missing=$(grep 'not found' <<<"$out" || true)
    [ -z "$missing" ] || fail "$f ($(inroot dpkg -S "$f" | cut -d: -f1)) needs libraries that no Depends brought:
$missing"
done <"$work/installed-files"
[ "$elves" -ge 5 ] || fail "only $elves ELF files in numaaff-tools and libnumaaff-c0: expected the three tools and the two libraries"

# The tools run, with the version of their package; the C library's I/O guard preloads.
version=$(inroot dpkg-query -W -f '${Version}' numaaff-tools)
version=${version%-*}
for t in numaaff-run numaaff-top numaaff-bench numaaff-report-plot; do
    out=$(inroot "$t" --version 2>&1) || fail "$t --version failed in the root: $out"
    [ "$out" = "$t $version" ] || fail "$t --version says '$out', not '$t $version'"
    out=$(inroot "$t" --help 2>&1) || fail "$t --help failed in the root: $out"
done
inroot numaaff-run --show | grep -q node || fail "numaaff-run --show printed no node in the root"
inroot numaaff-top --once --interval 0.2 >/dev/null || fail "numaaff-top --once failed in the root"
# (By its soname: the name libnumaaff_ioguard.so is the link name, in libnumaaff-c-dev.)
out=$(inroot env LD_PRELOAD=libnumaaff_ioguard.so.0 sh -c 'echo guarded' 2>&1)
[ "$out" = guarded ] || fail "the I/O guard does not preload in the root: $out"
# python3 and gnuplot are only recommended: without them numaaff-report-plot says which is missing.
plot="numaaff-report-plot has python3"
if ! inroot sh -c 'command -v python3' >/dev/null; then
    echo '{}' >"$root/tmp/report.json"
    out=$(inroot numaaff-report-plot /tmp/report.json 2>&1) && fail "numaaff-report-plot succeeded without python3"
    grep -q 'python3 is not installed' <<<"$out" || fail "numaaff-report-plot without python3 says: $out"
    plot="without python3 (recommended only), numaaff-report-plot says '$out'"
fi
echo "   $elves ELF files find their libraries; the 4 tools run (--version, --help; numaaff-run --show, numaaff-top --once); the I/O guard preloads; $plot"

apt_install apt-install-dev.log libnumaaff-dev libnumaaff-c-dev
sort -u -o "$work/installed-files" "$work/installed-files"
out=$(inroot env LD_PRELOAD=libnumaaff_ioguard.so sh -c 'echo guarded' 2>&1)
[ "$out" = guarded ] || fail "the I/O guard does not preload by its link name in the root: $out"

# What numaaff's headers include and the consumers' find modules and pkg-config look for.
for f in /usr/include/hwloc.h /usr/include/numa.h /usr/include/numaif.h /usr/include/linux/futex.h \
         /usr/lib/*/libhwloc.so /usr/lib/*/libnuma.so /usr/lib/*/pkgconfig/hwloc.pc /usr/lib/*/pkgconfig/numa.pc; do
    matches=("$root"$f)
    [ -e "${matches[0]}" ] || fail "$f is missing after installing the packages: libnumaaff-dev's Depends do not bring it"
done

# The C and Fortran consumers, and a program of the headers' dependencies, built with the
# compilers the Depends brought (gfortran-N | gfortran-mod-V, and gfortran-N's gcc-N) and the
# flags of the packages' .pc files: pkg-config, which a Makefile user has, is added for them.
fc=$(inroot dpkg-query -W -f '${Depends}' libnumaaff-c-dev | grep -o 'gfortran-[0-9]\+' | head -n 1) ||
    fail "libnumaaff-c-dev does not depend on gfortran-N | gfortran-mod-V: nothing installs a compiler that reads its .mod files"
[ "$(inroot dpkg-query -W -f '${db:Status-Status}' "$fc" 2>/dev/null)" = installed ] ||
    fail "apt chose another provider of libnumaaff-c-dev's Fortran dependency than $fc: $(inroot dpkg-query -W -f '${Package} ' 'gfortran*' 'flang*' 2>/dev/null)"
cc=gcc-${fc#gfortran-}
inroot "${apt[@]}" install --no-install-recommends pkg-config >"$work/apt-pkg-config.log" 2>&1 || {
    cat "$work/apt-pkg-config.log" >&2; fail "apt could not install pkg-config in the root"; }
mkdir -p "$root/tmp/consumers"
cp "$here/consumer/main.c" "$here/consumer/main.f90" "$root/tmp/consumers/"
printf '%s\n' '#include <hwloc.h>' '#include <numa.h>' '#include <numaif.h>' '#include <linux/futex.h>' \
    'int main(void) { hwloc_topology_t t; return hwloc_topology_init(&t) != 0 || numa_available() < 0; }' >"$root/tmp/consumers/deps.c"
consumer() { # NAME COMMAND: build and run a consumer in the root, in /tmp/consumers
    local out
    out=$(inroot sh -c "cd /tmp/consumers && $2" 2>&1) || fail "$1 in the root failed:
$out"
    echo "   ${out:-$1: ok}"
}
echo "== consumers in the root (compilers from the Depends: $fc, $cc)"
consumer "headers' dependencies" "$cc deps.c \$(pkg-config --cflags --libs numaaff) -o deps && ./deps"
consumer "C consumer" "$cc main.c \$(pkg-config --cflags --libs numaaff-c) -o c && numaaff-run -n 0 -- ./c"
consumer "Fortran consumer" "$fc main.f90 \$(pkg-config --cflags --libs numaaff-fortran) -o fortran && ./fortran"

# apt purges the four packages: none is known to dpkg and no file of theirs is left.
inroot "${apt[@]}" purge "${packages[@]}" >"$work/apt-purge.log" 2>&1 || { cat "$work/apt-purge.log" >&2; fail "apt-get purge failed in the root"; }
for p in "${packages[@]}"; do
    ! inroot dpkg -L "$p" >/dev/null 2>&1 || fail "dpkg still lists $p's files after apt-get purge"
done
left=()
while read -r f; do
    [ -d "$root$f" ] && [ ! -L "$root$f" ] && continue  # shared directories (/usr/bin) stay
    [ -e "$root$f" ] || [ -L "$root$f" ] && left+=("$f")
done <"$work/installed-files"
for d in /usr/include/numaaff /usr/lib/*/cmake/numaaff "${packages[@]/#//usr/share/doc/}"; do
    matches=("$root"$d)
    [ ! -e "${matches[0]}" ] || left+=("$d")
done
[ ${#left[@]} -eq 0 ] || fail "left in the root after apt-get purge: ${left[*]}"

unmount_all
rm -rf --one-file-system "$root"
echo "debian_fresh_root.sh: in a minimal Debian 12, apt installed the 4 packages with what their Depends name; $elves ELF files find their libraries, the tools run, the C and Fortran consumers build with $cc and $fc and run; apt-get purge left no file (${SECONDS} s)"
