#!/bin/sh
# check_site.sh DOXYGEN DOXYFILE OUTPUT GUIDE: builds the site from nothing; any warning fails
# (WARN_AS_ERROR) and is printed; then every guide page and the API's main entry points must
# have a page in the site.
set -eu
doxygen=$1 doxyfile=$2 out=$3 guide=$4
rm -rf "$out"
mkdir -p "$out"
if ! "$doxygen" "$doxyfile" >"$out/doxygen.log" 2>&1 || [ -s "$out/warnings.txt" ]; then
    echo "doxygen failed or warned:"; cat "$out/warnings.txt" "$out/doxygen.log"; exit 1
fi
html=$out/html
[ -f "$html/index.html" ] || { echo "no $html/index.html"; exit 1; }
pages=0  # the guide pages present (none is not an error: the API reference is the site)
for md in "$guide"/*.md; do
    [ -e "$md" ] || continue
    # A guide page's anchor is its first line's {#name}: its HTML page is name.html.
    anchor=$(sed -n '1s/.*{#\([A-Za-z0-9_]*\)}.*/\1/p' "$md")
    [ -n "$anchor" ] || { echo "$md: the first line has no {#anchor}"; exit 1; }
    [ -f "$html/$anchor.html" ] || { echo "$md: no page $anchor.html in the site"; exit 1; }
    pages=$((pages + 1))
done
for c in classnumaaff_1_1thread__pool classnumaaff_1_1topology classnumaaff_1_1task__group; do
    [ -f "$html/$c.html" ] || { echo "no API page $c.html"; exit 1; }
done
echo "site built without a warning: $pages guide pages, the API reference, in $html"
