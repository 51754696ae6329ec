#!/bin/sh
# Three relay demos on 127.0.0.1, each with three relay_client players that
# must end with the same state and no desync:
#  1. a relay and three players; player 1 is frozen (kill -STOP) for 6 s
#     mid-match, loses its relay link, reconnects and catches up;
#  2. a LAN host: player 0's own process runs the relay (--host), the other
#     two join it with the credentials it prints;
#  3. the relay is killed (kill -9) mid-match and started again with the same
#     flags and its --state: every player resumes from its own horizon.
# Usage: sh examples-c/relay_demo.sh [PORT]   (from the project root; uses
# PORT, PORT+1 and PORT+2)
set -e
PORT=${1:-47100}
HERE="$(dirname "$0")"
ROOT="$HERE/.."
make -C "$HERE" >/dev/null
(cd "$ROOT" && cargo build --release --quiet -p rungs-relay --bin rungs-relay)
RELAY="${CARGO_TARGET_DIR:-$ROOT/target}/release/rungs-relay"
CLIENT="$HERE/build/relay_client"
DIR=$(mktemp -d)
R=
H=
trap 'kill $R $H 2>/dev/null || true; rm -rf "$DIR"' EXIT
RUNGS_RELAY_SECRET=00112233445566778899aabbccddeeff
export RUNGS_RELAY_SECRET

# The three players' last lines must show the same state; no DESYNC.
same_states() {
    for s in 0 1 2; do tail -n 1 "$DIR/$1$s.out"; done
    ! grep -q DESYNC "$DIR"/$1*.out || { echo "relay demo ($1): desync"; exit 1; }
    STATES=$(for s in 0 1 2; do tail -n 1 "$DIR/$1$s.out" | sed 's/.*state //'; done | sort -u | wc -l)
    [ "$STATES" = 1 ] || { echo "relay demo ($1): states differ"; exit 1; }
}

echo "== 1. a frozen player reconnects"
echo "match 7 seats 3 humans 0,1,2" > "$DIR/matches.txt"
"$RELAY" serve --listen 127.0.0.1:$PORT --matches "$DIR/matches.txt" 2> "$DIR/relay.log" & R=$!
sleep 0.3
for s in 0 1 2; do
    "$RELAY" ticket --match 7 --seat $s > "$DIR/ticket$s"
done
for s in 0 1 2; do
    "$CLIENT" 127.0.0.1:$PORT "$(cat "$DIR/ticket$s")" 3 600 > "$DIR/freeze$s.out" & eval P$s=\$!
done
sleep 2
kill -STOP $P1; sleep 6; kill -CONT $P1
wait $P0; wait $P1; wait $P2
grep -q "relay link back" "$DIR/freeze1.out" || { echo "relay demo: player 1 never reconnected"; cat "$DIR/freeze1.out"; exit 1; }
same_states freeze
kill $R; wait $R || true; R=

echo "== 2. a LAN host runs the relay in its own game"
"$CLIENT" --host $((PORT + 1)) 3 450 > "$DIR/host0.out" & H=$!
for i in $(seq 50); do grep -q "credentials seat 2" "$DIR/host0.out" 2>/dev/null && break; sleep 0.1; done
for s in 1 2; do
    CREDS=$(sed -n "s/^credentials seat $s: //p" "$DIR/host0.out")
    "$CLIENT" 127.0.0.1:$((PORT + 1)) "$CREDS" 3 450 > "$DIR/host$s.out" & eval P$s=\$!
done
wait $P1; wait $P2; wait $H; H=
same_states host

echo "== 3. the relay is killed mid-match and resumes from its journal"
echo "match 8 seats 3 humans 0,1,2" > "$DIR/matches.txt"
SERVE="serve --listen 127.0.0.1:$((PORT + 2)) --matches $DIR/matches.txt --state $DIR/state"
"$RELAY" $SERVE 2> "$DIR/relay-before.log" & R=$!
sleep 0.3
for s in 0 1 2; do
    "$RELAY" ticket --match 8 --seat $s > "$DIR/ticket$s"
done
for s in 0 1 2; do
    "$CLIENT" 127.0.0.1:$((PORT + 2)) "$(cat "$DIR/ticket$s")" 3 750 > "$DIR/restart$s.out" & eval P$s=\$!
done
sleep 4
kill -9 $R; wait $R 2>/dev/null || true
"$RELAY" $SERVE 2> "$DIR/relay-after.log" & R=$!
wait $P0; wait $P1; wait $P2
grep -q "match 8 resumed from its journal" "$DIR/relay-after.log" || { echo "relay demo: no resume"; cat "$DIR/relay-after.log"; exit 1; }
! grep -q "resumes from frame 0" "$DIR"/restart*.out || { echo "relay demo: a player reloaded"; exit 1; }
same_states restart
echo "relay demo: a reconnect, a LAN host and a relay restart; the same commands on the same frames"
