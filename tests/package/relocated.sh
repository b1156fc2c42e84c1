#!/bin/sh
# relocated.sh CMAKE CTEST PREFIX WORK CONSUMER LIBDIR [CMAKE OPTIONS...]: the installed tree
# copied to WORK/moved serves the CMake consumer (configured with the options: the build's
# compilers and flags, a sanitizer's included) and pkg-config there, and none of its CMake or
# pkg-config files names PREFIX.
set -eu
cmake=$1 ctest=$2 prefix=$3 work=$4 consumer=$5 libdir=$6
shift 6
rm -rf "$work"
mkdir -p "$work"
cp -a "$prefix" "$work/moved"
moved=$work/moved
if grep -rlF "$prefix" "$moved/$libdir/cmake" "$moved/$libdir/pkgconfig"; then
    echo "the files above name the install prefix $prefix: the tree is not relocatable"; exit 1
fi
"$ctest" --build-and-test "$consumer" "$work/build" --build-generator "Unix Makefiles" \
    --build-options "$@" -DCMAKE_PREFIX_PATH="$moved" \
    --test-command "$ctest" --output-on-failure
grep -q "numaaff_DIR:PATH=$moved/" "$work/build/CMakeCache.txt" || { echo "the consumer did not use the moved tree"; exit 1; }
for pc in "$moved/$libdir/pkgconfig"/*.pc; do
    name=$(basename "$pc" .pc)
    got=$(PKG_CONFIG_PATH="$moved/$libdir/pkgconfig" pkg-config --variable=prefix "$name")
    [ "$(cd "$got" && pwd -P)" = "$(cd "$moved" && pwd -P)" ] || { echo "$name.pc: prefix $got, not $moved"; exit 1; }
done
echo "the moved tree serves CMake and pkg-config consumers"
