#!/bin/sh
# tools_installed.sh BINDIR MANDIR VERSION: every tool is in BINDIR, says "NAME VERSION" to
# --version, prints its usage to stdout for --help (status 0), and has a manual page in MANDIR
# that man renders without a warning; numaaff-run --show prints the binding it would give.
set -eu
bindir=$1 mandir=$2 version=$3
for t in numaaff-run numaaff-top numaaff-bench numaaff-report-plot; do
    [ -x "$bindir/$t" ] || { echo "$t is not installed in $bindir"; exit 1; }
    got=$("$bindir/$t" --version)
    [ "$got" = "$t $version" ] || { echo "$t --version: '$got', not '$t $version'"; exit 1; }
    "$bindir/$t" --help | grep -qi "usage\|$t" || { echo "$t --help printed no usage"; exit 1; }
    page=$mandir/man1/$t.1.gz
    [ -f "$page" ] || { echo "no manual page $page"; exit 1; }
    warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null)
    [ -z "$warnings" ] || { echo "$page: $warnings"; exit 1; }
    zcat "$page" | grep -q "numaaff $version" || { echo "$page does not name version $version"; exit 1; }
done
"$bindir/numaaff-run" --show | grep -q node
echo "4 tools with --help, --version and a manual page"
