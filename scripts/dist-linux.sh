#!/usr/bin/env bash
# The Linux release archive (mk/dist.mk, `make dist`):
#
#   scripts/dist-linux.sh LIBDIR DIST_DIR VERSION
#
# LIBDIR holds cargo's release librungs.so and librungs.a. Writes
# DIST_DIR/rungs-VERSION-linux-ARCH.tar.gz (ARCH of the library), one folder
# rungs-VERSION-linux-ARCH/ holding what `make install` installs
# (scripts/dist-install.sh: lib/ with the library, its SONAME and dev links
# and the static library, all without debug info, include/, a relocatable
# lib/pkgconfig/rungs.pc and lib/cmake/rungs/), and README.md
# (docs/dist/README-linux.md), LICENSE-MIT, LICENSE-APACHE, CHANGELOG.md,
# examples/ladder.c with examples/CMakeLists.txt, SHA256SUMS.
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 LIBDIR DIST_DIR VERSION" >&2
    exit 2
fi
libdir=$1 dist=$2 version=$3
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/dist-common.sh
. "$root/scripts/dist-common.sh"

case $(objdump -f "$libdir/librungs.so" | sed -n 's/^architecture: //p') in
    i386:x86-64*) arch=x86_64 ;;
    aarch64*) arch=aarch64 ;;
    i386*) arch=i686 ;;
    *) echo "$0: $libdir/librungs.so is of an architecture this script does not name" >&2; exit 1 ;;
esac
name=rungs-$version-linux-$arch
stage=$dist/stage/$name
stage_common "$stage" "$root/docs/dist/README-linux.md"
cp "$root/cmake/example/CMakeLists.txt" "$stage/examples/CMakeLists.txt"
"$root/scripts/dist-install.sh" "$libdir" "$stage" "$version" --relocatable
finish_stage "$stage"
rm -f "$dist/$name.tar.gz"
tar -C "$dist/stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$(dist_epoch)" \
    -cf - "$name" | gzip -9n >"$dist/$name.tar.gz"
sum_archives "$dist"
echo "$dist/$name.tar.gz"
