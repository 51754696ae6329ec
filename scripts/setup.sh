#!/usr/bin/env bash
# Install what building and testing rungs needs, if it is missing:
# a C compiler and make, pkg-config, cmake, valgrind, python3; rustfmt and
# clippy.
# Idempotent and quick when everything is there. Used by `make demo` and
# `make test` (and so by .ci/run).
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
command -v c++ >/dev/null 2>&1 || need_apt+=(g++)
command -v make >/dev/null 2>&1 || need_apt+=(make)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# The CMake package check (make cmake-check, make dist-check).
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)
# The docs check (scripts/doc-paths.py).
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
# AddressSanitizer's runtime comes with gcc's libasan.
if command -v cc >/dev/null 2>&1 && ! echo 'int main(void){return 0;}' | cc -x c -fsanitize=address -o /dev/null - >/dev/null 2>&1; then
    need_apt+=(libasan8)
fi

"$(dirname "$0")/apt-install.sh" "${need_apt[@]}"

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo is missing; install Rust from https://rustup.rs" >&2
    exit 1
fi
if command -v rustup >/dev/null 2>&1; then
    cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
    cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
fi
