#!/usr/bin/env bash
# The Windows release archive for mod authors (mk/dist.mk, `make dist`):
#
#   scripts/dist-windows.sh WINDOWS_OUT DIST_DIR VERSION
#
# WINDOWS_OUT is what `make windows` wrote (target/windows): i686/ and
# x86_64/ each with rungs.dll, rungs.lib, librungs.dll.a and rungs.def.
# Writes DIST_DIR/rungs-VERSION-windows.zip, one folder rungs-VERSION-windows/
# holding
#   README.md (docs/dist/README-windows.md), LICENSE-MIT, LICENSE-APACHE,
#   CHANGELOG.md, include/, examples/ladder.c,
#   i686/ and x86_64/: those four files, SHA256SUMS.
# Not librungs.a: a program linking it statically imports std's
# bcryptprimitives.dll, which Wine 8 lacks, unless it also links
# scripts/windows-processprng.c first as rungs.dll does (docs/windows.md); a
# MinGW mod that wants rungs linked in builds it from the source.
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 WINDOWS_OUT DIST_DIR VERSION" >&2
    exit 2
fi
windows_out=$1 dist=$2 version=$3
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/dist-common.sh
. "$root/scripts/dist-common.sh"

name=rungs-$version-windows
stage=$dist/stage/$name
stage_common "$stage" "$root/docs/dist/README-windows.md"
for arch in i686 x86_64; do
    mkdir -p "$stage/$arch"
    for f in rungs.dll rungs.lib librungs.dll.a rungs.def; do
        [ -f "$windows_out/$arch/$f" ] || { echo "$0: $windows_out/$arch/$f is missing (make windows)" >&2; exit 1; }
        cp "$windows_out/$arch/$f" "$stage/$arch/"
    done
done
finish_stage "$stage"
rm -f "$dist/$name.zip"
# -X: no extra attributes (uid, times beyond the one stamp); sorted names.
(cd "$dist/stage" && find "$name" | LC_ALL=C sort | zip -X -q -@ "$dist/$name.zip")
sum_archives "$dist"
echo "$dist/$name.zip"
