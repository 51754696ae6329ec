#!/bin/sh
# Build rungs-sim with profile-guided optimisation (PGO): an instrumented
# build plays a few training games, llvm-profdata merges what they ran, and
# the release build uses it. The same code and the same results byte for
# byte (`--json`); only the layout and inlining the compiler picks change.
# See docs/rungs-sim.md, "Two threads".
#
#   scripts/sim-pgo.sh TARGET_DIR      prints the path of the built binary
#
# Needs llvm-profdata of the LLVM rustc uses (`rustc -vV`): found as
# llvm-profdata-<major>, else llvm-profdata, else set LLVM_PROFDATA
# (Debian: apt-get install llvm-<major>). Leaves target/release alone: the
# builds go to TARGET_DIR/pgo-gen and TARGET_DIR/pgo.
set -eu
target_dir=${1:?usage: sim-pgo.sh TARGET_DIR}
case $target_dir in /*) ;; *) target_dir=$(pwd)/$target_dir ;; esac
llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
profdata=${LLVM_PROFDATA:-$(command -v "llvm-profdata-$llvm_major" || command -v llvm-profdata || true)}
if [ -z "$profdata" ]; then
    echo "sim-pgo: no llvm-profdata for LLVM $llvm_major (apt-get install llvm-$llvm_major, or set LLVM_PROFDATA)" >&2
    exit 2
fi
data=$target_dir/pgo-data
rm -rf "$data"
mkdir -p "$data"
RUSTFLAGS="-Cprofile-generate=$data" \
    cargo build --release --quiet -p rungs-sim --bin rungs-sim --target-dir "$target_dir/pgo-gen"
rm -f "$data"/*.profraw # the build scripts' own
trained=$target_dir/pgo-gen/release/rungs-sim
# Training: an 8-player game at 150 ms (one thread and two), a rough
# network, a tracking-policy game.
"$trained" --players 8 --frames 6000 --rtt 150 --threads 1 >/dev/null
"$trained" --players 8 --frames 3000 --rtt 150 --threads 2 >/dev/null
"$trained" --players 5 --frames 3000 --rtt 60 --jitter 20 --loss 2% --threads 1 >/dev/null
"$trained" --players 6 --frames 3000 --rtt 120 --policy tracking --threads 1 >/dev/null
"$profdata" merge -o "$data/rungs-sim.profdata" "$data"/*.profraw
RUSTFLAGS="-Cprofile-use=$data/rungs-sim.profdata" \
    cargo build --release --quiet -p rungs-sim --bin rungs-sim --target-dir "$target_dir/pgo"
echo "$target_dir/pgo/release/rungs-sim"
