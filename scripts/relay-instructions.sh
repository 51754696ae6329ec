#!/bin/sh
# Instructions the relay executes per match-tick (repeatable on a noisy
# machine, unlike its CPU time): benches/relay_load.rs under callgrind,
# counting only the relay's calls in the measured window
# (relay_load::relay_batch_measured: datagrams in, timers, datagrams out).
#
#   scripts/relay-instructions.sh [MATCHES] [SECONDS]     (default 100 2)
#
# 8-seat matches at 30 ticks/s, a bundle every tick, 120 APM per player;
# SECONDS simulated after 2 s of warm-up. Needs valgrind.
set -eu
matches=${1:-100}
seconds=${2:-2}
cd "$(dirname "$0")/.."
bench=$(cargo bench -p rungs-sim --bench relay_load --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*relay_load[^"]*\)".*/\1/p' | tail -1)
[ -x "$bench" ] || { echo "relay-instructions: could not build crates/rungs-sim/benches/relay_load.rs" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
RUNGS_RELAY_LOAD_SECONDS=$seconds valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect='relay_load::relay_batch_measured' "$bench" "$matches" 2>&1 |
    grep -E '^ *[0-9]+ \|' || true
ir=$(callgrind_annotate "$out" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
ticks=$((matches * 30 * seconds))
echo "relay instructions: $ir over $ticks match-ticks = $((ir / ticks)) per match-tick ($matches matches, $seconds s)"
