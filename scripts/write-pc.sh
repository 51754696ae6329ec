#!/bin/sh
# write-pc.sh OUT INCLUDEDIR LIBDIR VERSION — write a pkg-config file for rungs.
# Libs.private lists what the Rust standard library needs when linking the
# static archive (pkg-config --static): rustc --print native-static-libs.
set -e
cat > "$1" <<PC
includedir=$2
libdir=$3

Name: rungs
Description: Adaptive network timing for lockstep games (C API)
Version: $4
Cflags: -I\${includedir}
Libs: -L\${libdir} -lrungs
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
PC
