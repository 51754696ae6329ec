#!/bin/sh
# A relay and three relay_client players on 127.0.0.1; player 1 is frozen
# (kill -STOP) for 6 s mid-match, loses its relay link, reconnects and
# catches up. Passes when all three end with the same state, player 1 saw
# its link come back, and nobody saw a desync.
# Usage: sh examples-c/relay_demo.sh [PORT]   (from the project root)
set -e
PORT=${1:-47100}
HERE="$(dirname "$0")"
ROOT="$HERE/.."
make -C "$HERE" >/dev/null
(cd "$ROOT" && cargo build --release --quiet --bin rungs-relay)
RELAY="${CARGO_TARGET_DIR:-$ROOT/target}/release/rungs-relay"
CLIENT="$HERE/build/relay_client"
DIR=$(mktemp -d)
trap 'kill $R 2>/dev/null || true; rm -rf "$DIR"' EXIT
RUNGS_RELAY_SECRET=00112233445566778899aabbccddeeff
export RUNGS_RELAY_SECRET
echo "match 7 seats 3 humans 0,1,2" > "$DIR/matches.txt"
"$RELAY" serve --listen 127.0.0.1:$PORT --matches "$DIR/matches.txt" 2> "$DIR/relay.log" & R=$!
sleep 0.3
for s in 0 1 2; do
    "$RELAY" ticket --match 7 --seat $s > "$DIR/ticket$s"
done
for s in 0 1 2; do
    "$CLIENT" 127.0.0.1:$PORT "$(cat "$DIR/ticket$s")" 3 600 > "$DIR/player$s.out" & eval P$s=\$!
done
sleep 2
kill -STOP $P1; sleep 6; kill -CONT $P1
wait $P0; wait $P1; wait $P2
for s in 0 1 2; do tail -n 1 "$DIR/player$s.out"; done
grep -q "relay link back" "$DIR/player1.out" || { echo "relay demo: player 1 never reconnected"; cat "$DIR/player1.out"; exit 1; }
! grep -q DESYNC "$DIR"/player*.out || { echo "relay demo: desync"; exit 1; }
STATES=$(for s in 0 1 2; do tail -n 1 "$DIR/player$s.out" | sed 's/.*state //'; done | sort -u | wc -l)
[ "$STATES" = 1 ] || { echo "relay demo: states differ"; exit 1; }
echo "relay demo: three players, one reconnect, the same commands on the same frames"
