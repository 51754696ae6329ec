#!/usr/bin/env bash
# Install what the Windows and 32-bit builds and checks need, if missing
# (`make windows`, `make windows-test`; docs/windows.md):
#   - MinGW-w64 C and C++ cross compilers for i686 and x86_64 (with
#     windres, dlltool, objdump, strip);
#   - wine and wine64 (Debian 12 ships Wine 8; 32-bit Wine needs i386
#     multiarch, which these machines do not have: the 32-bit code runs as a
#     Linux program instead);
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

# No recommends: wine64 recommends wine32, which needs i386 multiarch.
"$(dirname "$0")/apt-install.sh" --no-install-recommends "${need_apt[@]}"

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
