#!/bin/sh
# The layers' rules that cargo alone does not state (ARCHITECTURE.md, "The
# layers"): what each crate may depend on, that what ships carries no
# simulator and no attack hooks, and that the sans-IO core touches no OS.
# Exits 1 on the first broken rule, naming it.
set -eu
cd "$(dirname "$0")/.."
fail() { echo "check-layers: $*" >&2; exit 1; }

deps() { cargo tree --quiet -p "$1" -e normal --prefix none | sed 's/ .*//' | sort -u | tr '\n' ' '; }

core=$(deps rungs-core)
[ "$core" = "rungs-core siphasher " ] || fail "rungs-core may depend on siphasher alone; it depends on: $core"

net=$(deps rungs-net)
case "$net" in *rungs-sim*) fail "rungs-net depends on the simulator: $net" ;; esac

shipped=$(cargo tree --quiet -p rungs -e normal,features --prefix none)
echo "$shipped" | grep -q '^rungs-sim ' && fail "the C library depends on the simulator"
echo "$shipped" | grep -q 'rungs-core feature "testing"' && fail "the C library turns on the attack hooks (rungs-core's testing feature)"

# The core reads no clock, starts no thread, opens no socket or file.
if grep -rnE 'SystemTime|Instant::now|std::thread|std::process|std::env|std::fs|UdpSocket|TcpStream' crates/rungs-core/src \
    | grep -vE '^[^:]+:[0-9]+:\s*//'; then
    fail "the sans-IO core touches the OS (above)"
fi
echo "check-layers: rungs-core depends on siphasher alone and touches no OS; the C library carries no simulator and no attack hooks"
