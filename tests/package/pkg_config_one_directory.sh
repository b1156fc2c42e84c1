#!/bin/sh
# usage: pkg_config_one_directory.sh <prefix> <pkgconfig dir> <name>...
# Fails unless every <name>.pc is in <pkgconfig dir>, no other .pc file is installed under
# <prefix>, and pkg-config, reading each file there, resolves its prefix to <prefix> (the
# files compute it from ${pcfiledir}, so a wrong relative path shows here).
prefix=$1
dir=$2
shift 2
status=0
stray=$(find "$prefix" -name '*.pc' ! -path "$dir/*")
if [ -n "$stray" ]; then
  echo "installed outside $dir: $stray"
  status=1
fi
want=$(cd "$prefix" && pwd -P)
for name in "$@"; do
  if [ ! -f "$dir/$name.pc" ]; then
    echo "missing: $dir/$name.pc"
    status=1
    continue
  fi
  got=$(PKG_CONFIG_PATH="$dir" pkg-config --variable=prefix "$name") || { status=1; continue; }
  got=$(cd "$got" 2>/dev/null && pwd -P)
  if [ "$got" != "$want" ]; then
    echo "$name.pc: prefix resolves to '$got', not '$want'"
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "pkg-config: $* in $dir, prefix $want"
exit "$status"
