#!/usr/bin/env bash
# Instructions per fingerprint of a statement the per-connection cache misses (its literal
# new each time: an ORM's inline values, PHP PDO's emulated prepares), for three shapes: a
# point select, a 200-byte ORM select and a 50-row insert. Runs `fingerprint-loop` under
# callgrind at N and 2N statements, and again only building them: what fingerprinting adds
# between N and 2N, over N, leaves out start-up and the making of the statements.
#
# Usage: scripts/callgrind-fingerprint.sh [N]   (default 10000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v valgrind >/dev/null || { echo "callgrind-fingerprint.sh: valgrind not found" >&2; exit 1; }
n=${1:-10000}
cargo build --quiet --release -p rttscope-benches --bin fingerprint-loop
count() { # statements kind [--build-only]
  valgrind --tool=callgrind --callgrind-out-file=/dev/null ./target/release/fingerprint-loop "$@" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for kind in point orm insert; do
  per=$n
  [ "$kind" = insert ] && per=$((n / 10))
  with=$(($(count $((2 * per)) "$kind") - $(count "$per" "$kind")))
  without=$(($(count $((2 * per)) "$kind" --build-only) - $(count "$per" "$kind" --build-only)))
  echo "$kind: $(((with - without) / per)) instructions per fingerprint"
done
