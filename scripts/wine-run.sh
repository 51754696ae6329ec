#!/usr/bin/env bash
# Run a Windows console program under wine64, in the project's own Wine
# prefix (target/windows/wineprefix, or RUNGS_WINEPREFIX), with Wine's debug
# output off. The prefix is created on first use only, non-interactively
# (no Mono or Gecko prompts, no display): Wine's first boot is slow.
#
#   scripts/wine-run.sh PROGRAM.exe [ARGS...]
#   scripts/wine-run.sh --32 PROGRAM.exe [ARGS...]
#
# --32 runs a 32-bit program under 32-bit Wine (wine32:i386), in a pure
# 32-bit prefix of its own (target/windows/wineprefix32, or
# RUNGS_WINEPREFIX32): the way a Tiberian Sun-era game and its mods run.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$root/target}
bits=64
if [ "${1:-}" = "--32" ]; then
    bits=32
    shift
fi
export WINEDEBUG=-all
export WINEDLLOVERRIDES="mscoree,mshtml=;winemenubuilder.exe=d"
unset DISPLAY WAYLAND_DISPLAY

if [ "$bits" = 32 ]; then
    export WINEPREFIX=${RUNGS_WINEPREFIX32:-$target_dir/windows/wineprefix32}
    export WINEARCH=win32
    loader=/usr/lib/wine/wine
    if [ ! -x "$loader" ]; then
        echo "wine-run: 32-bit Wine (wine32:i386) is not installed (scripts/setup-windows.sh installs it)" >&2
        exit 1
    fi
else
    export WINEPREFIX=${RUNGS_WINEPREFIX:-$target_dir/windows/wineprefix}
    loader=/usr/lib/wine/wine64
    [ -x "$loader" ] || loader=$(command -v wine64 || true)
    if [ -z "$loader" ]; then
        echo "wine-run: wine64 is not installed (scripts/setup-windows.sh installs it)" >&2
        exit 1
    fi
fi

# Wait until the prefix's wineserver has exited (Wine's own, else the one
# on PATH).
wait_for_wineserver() {
    "$(dirname "$loader")/wineserver" -w 2>/dev/null || wineserver -w || true
}

if [ ! -f "$WINEPREFIX/.rungs-ready" ]; then
    mkdir -p "$(dirname "$WINEPREFIX")"
    (
        # One first boot, even when several runs start at once.
        flock 9
        if [ ! -f "$WINEPREFIX/.rungs-ready" ]; then
            echo "wine-run: creating the Wine prefix $WINEPREFIX (once)" >&2
            "$loader" wineboot --init >/dev/null 2>&1 || true
            wait_for_wineserver
            [ -f "$WINEPREFIX/system.reg" ] || { echo "wine-run: wineboot did not create $WINEPREFIX" >&2; exit 1; }
            touch "$WINEPREFIX/.rungs-ready"
        fi
    ) 9>"$WINEPREFIX.lock"
fi
# Wine's client can lose its wineserver while the server shuts down after
# its last client (seen in a CI run: "wine client error:0: recvmsg:
# Connection reset by peer", before the program ran). That one failure of
# Wine's own, and only it, is retried once, loudly, after the old server has
# gone; any failure of the program itself stands.
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for attempt in 1 2; do
    status=0
    "$loader" "$@" 2>"$err" || status=$?
    cat "$err" >&2
    if [ "$status" -eq 0 ] || [ "$attempt" -eq 2 ] || ! grep -q '^wine client error:' "$err"; then
        exit "$status"
    fi
    echo "wine-run: Wine lost its server (exit $status); waiting for it to go and running $1 again" >&2
    wait_for_wineserver
done
