#!/usr/bin/env bash
# Build and run examples/ladder.c against rungs under PREFIX alone (an
# unpacked release archive or a `make install` prefix): no path into the
# repository, no other pkg-config or CMake package on the search paths.
#
#   scripts/dist-check-linux.sh PREFIX LADDER_C CMAKELISTS_DIR CHECK...
#
# CHECK is pkg-config (shared and static, through PREFIX/lib/pkgconfig/rungs.pc)
# or cmake (rungs::rungs and rungs::rungs_static through
# PREFIX/lib/cmake/rungs). Each program must print the version of the
# library under PREFIX and the ladder's answer for 250 ms at 30 frames/s;
# the shared one must load PREFIX's library.
set -euo pipefail

if [ $# -lt 4 ]; then
    echo "usage: $0 PREFIX LADDER_C CMAKELISTS_DIR pkg-config|cmake..." >&2
    exit 2
fi
prefix=$(cd "$1" && pwd)
ladder=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
cmakelists=$(cd "$3" && pwd)
shift 3
version=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/rungs.pc")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Nothing but PREFIX: no include path, library path or package path from the
# caller's environment.
unset CPATH C_INCLUDE_PATH LIBRARY_PATH LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH
export PKG_CONFIG_LIBDIR=$prefix/lib/pkgconfig

# The program's output: rungs' version and both of the ladder's answers.
judge() {
    local what=$1 program=$2 out
    out=$("$program" 250 30)
    grep -q "^rungs $version " <<<"$out" || { echo "$what: does not print rungs $version"; exit 1; }
    grep -q '2/6 Fast (rung 2)' <<<"$out" && grep -q '3/9 Normal (rung 3)' <<<"$out" ||
        { echo "$what: not the ladder's answer for 250 ms at 30 frames/s:"; echo "$out"; exit 1; }
}

# The shared program loads librungs.so.<ABI> from PREFIX/lib, nowhere else.
loads_prefix() {
    local what=$1 program=$2 soname loaded
    soname=$(readlink "$prefix/lib/librungs.so")
    loaded=$(ldd "$program" | sed -n "s|^[[:space:]]*$soname => \(.*\) (0x.*|\1|p")
    [ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "$prefix/lib/$soname")" ] ||
        { echo "$what: does not load $prefix/lib/$soname:"; ldd "$program"; exit 1; }
}

# Whole outputs into grep: with pipefail, grep -q closing a pipe early would
# fail the command writing to it.
links_librungs() {
    grep -q librungs <<<"$(ldd "$1")"
}

for check in "$@"; do
    case $check in
    pkg-config)
        cd "$work"
        cc -std=c99 -Wall -Wextra -Werror -pedantic "$ladder" -o ladder-pc \
            $(pkg-config --cflags --libs rungs) -Wl,-rpath,"$(pkg-config --variable=libdir rungs)"
        judge "pkg-config, shared" ./ladder-pc
        loads_prefix "pkg-config, shared" ./ladder-pc
        # Static: the archive by path (the .so beside it would win over -l),
        # then what Libs.private names.
        cc -std=c99 -Wall -Wextra -Werror -pedantic "$ladder" -o ladder-pc-static \
            $(pkg-config --cflags rungs) "$(pkg-config --variable=libdir rungs)/librungs.a" \
            $(pkg-config --static --libs-only-l rungs | sed 's/-lrungs//')
        ! links_librungs ./ladder-pc-static || { echo "pkg-config, static: loads librungs"; exit 1; }
        judge "pkg-config, static" ./ladder-pc-static
        echo "pkg-config: ladder.c builds and runs against $prefix, shared and static (rungs $version)"
        ;;
    cmake)
        mkdir -p "$work/cmake-src"
        cp "$cmakelists/CMakeLists.txt" "$work/cmake-src/"
        cp "$ladder" "$work/cmake-src/ladder.c"
        cmake -S "$work/cmake-src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
            -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
            >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
        cmake --build "$work/cmake-build" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
        judge "cmake, rungs::rungs" "$work/cmake-build/ladder"
        loads_prefix "cmake, rungs::rungs" "$work/cmake-build/ladder"
        ! links_librungs "$work/cmake-build/ladder_static" ||
            { echo "cmake, rungs::rungs_static: loads librungs"; exit 1; }
        judge "cmake, rungs::rungs_static" "$work/cmake-build/ladder_static"
        echo "cmake: find_package(rungs) builds ladder.c against $prefix with rungs::rungs and rungs::rungs_static (rungs $version)"
        ;;
    *)
        echo "$0: unknown check $check" >&2
        exit 2
        ;;
    esac
done
