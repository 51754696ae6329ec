#!/usr/bin/env bash
# Check the release archives as their users meet them (mk/dist.mk, `make
# dist-check`):
#
#   scripts/dist-check.sh DIST_DIR VERSION
#
# Each archive is unpacked into an empty temporary folder and checked from
# there alone, with no path into the repository:
#   - its SHA256SUMS, and DIST_DIR/SHA256SUMS for the archives;
#   - Windows, for i686 and x86_64: examples/ladder.c built with MinGW two
#     ways (the MinGW import library librungs.dll.a; the MSVC import library
#     rungs.lib, with MinGW's linker standing in for MSVC's) and run under
#     Wine, 32-bit Wine for i686, with the archive's rungs.dll beside it;
#   - Linux: examples/ladder.c through the archive's pkg-config file and its
#     CMake package, shared and static (scripts/dist-check-linux.sh).
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 DIST_DIR VERSION" >&2
    exit 2
fi
dist=$(cd "$1" && pwd) version=$2
root=$(cd "$(dirname "$0")/.." && pwd)
windows_zip=$dist/rungs-$version-windows.zip
linux_tgz=$(ls "$dist"/rungs-"$version"-linux-*.tar.gz)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$dist" && sha256sum --quiet -c SHA256SUMS) || { echo "dist-check: $dist/SHA256SUMS does not match"; exit 1; }

# The program's output: rungs' version and both of the ladder's answers.
judge() {
    local what=$1 out=$2
    grep -q "^rungs $version " <<<"$out" || { echo "$what: does not print rungs $version:"; echo "$out"; exit 1; }
    grep -q '2/6 Fast (rung 2)' <<<"$out" && grep -q '3/9 Normal (rung 3)' <<<"$out" ||
        { echo "$what: not the ladder's answer for 250 ms at 30 frames/s:"; echo "$out"; exit 1; }
}

# ---- Windows ----
mkdir "$work/windows"
unzip -q "$windows_zip" -d "$work/windows"
win=$work/windows/rungs-$version-windows
(cd "$win" && sha256sum --quiet -c SHA256SUMS) || { echo "dist-check: the Windows archive's SHA256SUMS does not match"; exit 1; }
for arch in i686 x86_64; do
    case $arch in
        i686) cc=i686-w64-mingw32-gcc wine=("$root/scripts/wine-run.sh" --32) format='pei-i386' ;;
        x86_64) cc=x86_64-w64-mingw32-gcc wine=("$root/scripts/wine-run.sh") format='pei-x86-64' ;;
    esac
    run=$work/windows/run-$arch
    mkdir "$run"
    cp "$win/$arch/rungs.dll" "$run/"
    flags=(-std=c99 -Wall -Wextra -Werror -pedantic -I"$win/include" -static-libgcc)
    "$cc" "${flags[@]}" "$win/examples/ladder.c" -o "$run/ladder-mingw.exe" "$win/$arch/librungs.dll.a"
    "$cc" "${flags[@]}" "$win/examples/ladder.c" -o "$run/ladder-msvc-lib.exe" "$win/$arch/rungs.lib"
    for exe in ladder-mingw ladder-msvc-lib; do
        # (Whole outputs into grep: with pipefail, grep -q closing the pipe
        # early would fail objdump.)
        grep -q "file format $format" <<<"$(objdump -f "$run/$exe.exe")" ||
            { echo "dist-check: $exe.exe is not a $arch program"; exit 1; }
        grep -qi 'DLL Name: rungs.dll' <<<"$(objdump -p "$run/$exe.exe")" ||
            { echo "dist-check: $exe.exe does not import rungs.dll"; exit 1; }
        judge "Windows $arch, $exe.exe" "$("${wine[@]}" "$run/$exe.exe" 250 30 | tr -d '\r')"
    done
    echo "windows $arch: ladder.c built from the archive alone (librungs.dll.a, rungs.lib) runs under ${wine[*]##*/} (rungs $version)"
done

# ---- Linux ----
mkdir "$work/linux"
tar -xzf "$linux_tgz" -C "$work/linux"
lin=$(ls -d "$work/linux"/rungs-"$version"-linux-*)
(cd "$lin" && sha256sum --quiet -c SHA256SUMS) || { echo "dist-check: the Linux archive's SHA256SUMS does not match"; exit 1; }
for f in lib/librungs.so."$version" lib/librungs.a; do
    if grep -q '\.debug_' <<<"$(readelf -S "$lin/$f")"; then echo "dist-check: $f carries debug info"; exit 1; fi
done
"$root/scripts/dist-check-linux.sh" "$lin" "$lin/examples/ladder.c" "$lin/examples" pkg-config cmake
echo "dist-check: $(basename "$windows_zip") and $(basename "$linux_tgz") build and run their example alone"
