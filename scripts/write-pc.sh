#!/bin/sh
# write-pc.sh OUT INCLUDEDIR LIBDIR VERSION — write a pkg-config file for rungs.
# LIBDIR is where librungs is: the Makefile passes $CARGO_TARGET_DIR/release
# (or target/release) for the build tree, PREFIX/lib for an install. Without
# LIBDIR the build tree's is used, honouring CARGO_TARGET_DIR.
# Libs.private lists what the Rust standard library needs when linking the
# static archive (pkg-config --static): rustc --print native-static-libs.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$root/$target ;; esac
libdir=${3:-$target/release}
cat > "$1" <<PC
includedir=${2:-$root/include}
libdir=$libdir

Name: rungs
Description: Adaptive network timing for lockstep games (C API)
Version: $4
Cflags: -I\${includedir}
Libs: -L\${libdir} -lrungs
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
PC
