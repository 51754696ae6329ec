#!/usr/bin/env bash
# Install what the Windows and 32-bit builds and checks need, if missing
# (`make windows`, `make windows-test`; docs/windows.md):
#   - MinGW-w64 C and C++ cross compilers for i686 and x86_64 (with
#     windres, dlltool, objdump, strip);
#   - wine and wine64 (Debian 12 ships Wine 8), and 32-bit Wine
#     (wine32:i386, after `dpkg --add-architecture i386` and `apt-get
#     update`): the i686 rungs.dll, its C harness, both vector replays and the
#     Tiberian Sun-shaped model run under it, as a TS-era game does;
#   - gcc-multilib, for the 32-bit Linux harness (gcc -m32);
#   - the Rust targets i686-pc-windows-gnu, x86_64-pc-windows-gnu and
#     i686-unknown-linux-gnu.
# Idempotent and quick when everything is there.
set -euo pipefail

need_apt=()
command -v i686-w64-mingw32-gcc >/dev/null 2>&1 || need_apt+=(gcc-mingw-w64-i686)
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need_apt+=(gcc-mingw-w64-x86-64)
command -v i686-w64-mingw32-g++ >/dev/null 2>&1 || need_apt+=(g++-mingw-w64-i686)
command -v x86_64-w64-mingw32-g++ >/dev/null 2>&1 || need_apt+=(g++-mingw-w64-x86-64)
[ -x /usr/lib/wine/wine64 ] || need_apt+=(wine wine64)
if command -v cc >/dev/null 2>&1 && ! echo 'int main(void){return 0;}' | cc -m32 -x c -o /dev/null - >/dev/null 2>&1; then
    need_apt+=(gcc-multilib)
fi

# No recommends: wine64 recommends wine32, which is installed below on its own.
"$(dirname "$0")/apt-install.sh" --no-install-recommends "${need_apt[@]}"

# 32-bit Wine: the i386 architecture first (apt-install.sh runs apt-get
# update, which then fetches its package lists).
if [ ! -x /usr/lib/wine/wine ]; then
    if ! dpkg --print-foreign-architectures | grep -qx i386; then
        echo "setup-windows: dpkg --add-architecture i386"
        sudo=""
        if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
        $sudo dpkg --add-architecture i386
    fi
    "$(dirname "$0")/apt-install.sh" --no-install-recommends wine32:i386
    [ -x /usr/lib/wine/wine ] || { echo "setup-windows: wine32:i386 did not install /usr/lib/wine/wine" >&2; exit 1; }
fi

if command -v rustup >/dev/null 2>&1; then
    installed=$(rustup target list --installed)
    for target in i686-pc-windows-gnu x86_64-pc-windows-gnu i686-unknown-linux-gnu; do
        if ! grep -qx "$target" <<<"$installed"; then
            echo "setup-windows: rustup target add $target"
            rustup target add "$target"
        fi
    done
else
    for target in i686-pc-windows-gnu x86_64-pc-windows-gnu i686-unknown-linux-gnu; do
        if [ ! -d "$(rustc --print sysroot)/lib/rustlib/$target" ]; then
            echo "setup-windows: the Rust target $target is missing and rustup is not installed" >&2
            exit 1
        fi
    done
fi
