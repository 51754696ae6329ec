#!/bin/sh
# Three chat processes on 127.0.0.1 talking through rungs' transport.
# Usage: sh examples-c/chat_demo.sh [COUNT] [BASE_PORT]   (from the project root)
set -e
COUNT=${1:-20}
BASE=${2:-47000}
make -C "$(dirname "$0")" >/dev/null
B="$(dirname "$0")/build/chat"
P0=$BASE; P1=$((BASE + 1)); P2=$((BASE + 2))
"$B" --seat 0 --port $P0 --peer 1=127.0.0.1:$P1 --peer 2=127.0.0.1:$P2 --count "$COUNT" & A=$!
"$B" --seat 1 --port $P1 --peer 0=127.0.0.1:$P0 --peer 2=127.0.0.1:$P2 --count "$COUNT" & C=$!
"$B" --seat 2 --port $P2 --peer 0=127.0.0.1:$P0 --peer 1=127.0.0.1:$P1 --count "$COUNT"
wait $A
wait $C
echo "chat demo: every line arrived once, in order, and was acknowledged"
