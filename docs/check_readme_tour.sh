#!/bin/sh
# check_readme_tour.sh README TOUR: the README's short tour (the code block after its "tour:"
# comment) is the code of TOUR between its [tour] markers, which the test suite builds and runs
# (docs.tour): the README shows code that works.
set -eu
readme=$1 tour=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -n '/^\/\/! \[tour\]$/,/^\/\/! \[tour\]$/p' "$tour" | sed '1d;$d' >"$tmp/want"
sed -n '/^<!-- tour:/,/^```$/p' "$readme" | sed '1,2d;$d' >"$tmp/got"
[ -s "$tmp/want" ] || { echo "$tour has no [tour] markers"; exit 1; }
if ! diff -u "$tmp/want" "$tmp/got"; then
    echo "$readme's tour differs from $tour (above: - the example, + the README)"
    exit 1
fi
echo "the README's tour is $tour ($(wc -l <"$tmp/want") lines)"
