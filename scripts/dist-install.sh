#!/usr/bin/env bash
# Lay out rungs for Linux under one prefix: what `make install` installs and
# what the Linux release archive holds (`make dist`).
#
#   scripts/dist-install.sh LIBDIR DEST VERSION PC_PREFIX
#
# LIBDIR holds cargo's librungs.so and librungs.a (target/release). DEST
# receives
#   include/rungs.h, include/rungs/*.h (and include/rungs.hpp when there is one)
#   lib/librungs.so.VERSION            the shared library, without debug info
#   lib/librungs.so.ABI -> ...         its SONAME, which build.rs set (decision 99)
#   lib/librungs.so -> librungs.so.ABI the name -lrungs finds
#   lib/librungs.a                     the static library, without debug info
#   lib/pkgconfig/rungs.pc             paths under PC_PREFIX, or relocatable
#                                      (found from the file's place) when
#                                      PC_PREFIX is --relocatable
#   lib/cmake/rungs/rungsConfig.cmake, rungsConfigVersion.cmake (relocatable)
set -euo pipefail

if [ $# -ne 4 ]; then
    echo "usage: $0 LIBDIR DEST VERSION PC_PREFIX|--relocatable" >&2
    exit 2
fi
libdir=$1 dest=$2 version=$3 pc_prefix=$4
root=$(cd "$(dirname "$0")/.." && pwd)

soname=$(objdump -p "$libdir/librungs.so" | sed -n 's/^ *SONAME *//p')
case $soname in
    librungs.so.[0-9]*) ;;
    *) echo "$0: $libdir/librungs.so has no SONAME librungs.so.<ABI> (build.rs sets it on Linux)" >&2; exit 1 ;;
esac
so_file=librungs.so.$version

install -d "$dest/include/rungs" "$dest/lib/pkgconfig" "$dest/lib/cmake/rungs"
install -m 644 "$root/include/rungs.h" "$dest/include/rungs.h"
install -m 644 "$root"/include/rungs/*.h "$dest/include/rungs/"
if [ -f "$root/include/rungs.hpp" ]; then
    install -m 644 "$root/include/rungs.hpp" "$dest/include/rungs.hpp"
fi

# The release profile keeps line tables for rungs-sim's profiling (about
# 9 MB in librungs.so): what ships drops them. The symbol table stays, so a
# backtrace from a user's bug report still names functions.
install -m 755 "$libdir/librungs.so" "$dest/lib/$so_file"
strip --strip-debug "$dest/lib/$so_file"
ln -sfn "$so_file" "$dest/lib/$soname"
ln -sfn "$soname" "$dest/lib/librungs.so"
# std's archive members include empty split-debuginfo (.dwo) files, which
# strip refuses: drop them first (as scripts/windows-dll.sh does).
install -m 644 "$libdir/librungs.a" "$dest/lib/librungs.a"
ar t "$dest/lib/librungs.a" | { grep '\.dwo$' || true; } | xargs -r ar d "$dest/lib/librungs.a"
strip --strip-debug "$dest/lib/librungs.a"

pc=$dest/lib/pkgconfig/rungs.pc
if [ "$pc_prefix" = --relocatable ]; then
    "$root/scripts/write-pc.sh" "$pc" --relocatable "$version"
else
    "$root/scripts/write-pc.sh" "$pc" "$pc_prefix/include" "$pc_prefix/lib" "$version"
fi

# The CMake package: the static target links what rungs.pc's Libs.private
# names (one list), less what Threads::Threads and the C compiler add.
static_libs=$(sed -n 's/^Libs.private: //p' "$pc" | tr ' ' '\n' | sed -n 's/^-l//p' |
    grep -vx -e c -e pthread | paste -sd ';')
IFS=. read -r major minor _ <<<"$version"
sizeof_void_p=$(( $(objdump -f "$dest/lib/$so_file" | grep -c 'elf64') ? 8 : 4 ))
sed -e "s|@SO_FILE@|$so_file|g" -e "s|@SONAME@|$soname|g" -e "s|@STATIC_LIBS@|$static_libs|g" \
    "$root/cmake/rungsConfig.cmake.in" >"$dest/lib/cmake/rungs/rungsConfig.cmake"
sed -e "s|@VERSION@|$version|g" -e "s|@VERSION_MAJOR@|$major|g" -e "s|@VERSION_MINOR@|$minor|g" \
    -e "s|@SIZEOF_VOID_P@|$sizeof_void_p|g" \
    "$root/cmake/rungsConfigVersion.cmake.in" >"$dest/lib/cmake/rungs/rungsConfigVersion.cmake"
