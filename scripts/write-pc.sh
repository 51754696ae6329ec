#!/bin/sh
# write-pc.sh OUT INCLUDEDIR LIBDIR VERSION — write a pkg-config file for rungs.
# write-pc.sh OUT --relocatable VERSION    — the same, its paths found from
#   the file's own place (${pcfiledir}, <prefix>/lib/pkgconfig), for a release
#   archive that may be unpacked anywhere.
# LIBDIR is where librungs is: the Makefile passes $CARGO_TARGET_DIR/release
# (or target/release) for the build tree, PREFIX/lib for an install. Without
# LIBDIR the build tree's is used, honouring CARGO_TARGET_DIR.
# Libs.private lists what the Rust standard library needs when linking the
# static archive (pkg-config --static): rustc --print native-static-libs.
# scripts/dist-install.sh reads it back for the CMake package.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$2" = --relocatable ]; then
    paths='prefix=${pcfiledir}/../..
includedir=${prefix}/include
libdir=${prefix}/lib'
    version=$3
else
    target=${CARGO_TARGET_DIR:-target}
    case $target in /*) ;; *) target=$root/$target ;; esac
    paths="includedir=${2:-$root/include}
libdir=${3:-$target/release}"
    version=$4
fi
cat > "$1" <<PC
$paths

Name: rungs
Description: Adaptive network timing for lockstep games (C API)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lrungs
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
PC
