#!/usr/bin/env bash
# rttscope's instructions per query of workload b (prepared point selects on 8 connections),
# where f counts a loop of `SELECT 1` on one: the execute path (binary parameters and rows,
# the loop detector) that f never takes. Runs `rttscope-bench --only b` with the release
# rttscope under `valgrind --tool=callgrind`, zeroes its counters once b's timed run through
# it has begun, dumps them 3 s later, and prints instructions / queries in that window (the
# queries are the calls of `Aggregates::command`, one per command). The profile stays in
# the output directory for `callgrind_annotate`.
#
# Usage: scripts/callgrind-b.sh [OUT_DIR]   (default target/bench/callgrind-b)
# Under valgrind the proxy passes about a sixth of b's q/s (a window of 20,000-35,000
# queries), and how its wake-ups fall moves the figure by about ±60: compare figures of this
# script with each other, not with f's or b's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=$(realpath -m "${1:-target/bench/callgrind-b}")
mkdir -p "$out"
rm -f "$out"/b.*.out*

for tool in valgrind callgrind_control callgrind_annotate; do
  command -v "$tool" >/dev/null || { echo "callgrind-b.sh: $tool not found (apt-get install valgrind)" >&2; exit 1; }
done
cargo build --quiet --release -p rttscope -p rttscope-benches

# The bench runs the binary it is given: this wrapper puts every long-running rttscope under
# callgrind and leaves its quick checks (check-config, --version) alone.
wrapper="$out/rttscope-under-callgrind"
cat >"$wrapper" <<EOF
#!/usr/bin/env bash
case "\${1:-}" in check-config|--version) exec "$PWD/target/release/rttscope" "\$@" ;; esac
exec valgrind --tool=callgrind --callgrind-out-file="$out/b.%p.out" "$PWD/target/release/rttscope" "\$@"
EOF
chmod +x "$wrapper"

log="$out/bench.log"
./target/release/rttscope-bench --only b --no-raw-pipe --no-haproxy --rounds 1 --duration 6s \
  --proxy-bin "$wrapper" --out-dir "$out" >"$log" 2>&1 &
bench=$!
for _ in $(seq 1 300); do
  grep -q "through rttscope" "$log" && break
  kill -0 "$bench" 2>/dev/null || { cat "$log" >&2; echo "callgrind-b.sh: the bench ended early" >&2; exit 1; }
  sleep 1
done
# Past the connections' set-up and into the timed run, then one 3 s window.
sleep 1.5
if ! callgrind_control -z >/dev/null 2>&1; then
  kill "$bench" 2>/dev/null || true
  echo "callgrind-b.sh: no rttscope under callgrind to zero (see $log)" >&2
  exit 1
fi
sleep 3
callgrind_control -d >/dev/null 2>&1
sleep 1
wait "$bench" || { cat "$log" >&2; exit 1; }

profile=$(find "$out" -maxdepth 1 -name 'b.*.out.1' | head -1)
if [ -z "$profile" ]; then
  echo "callgrind-b.sh: callgrind wrote no dump in $out" >&2
  exit 1
fi
cp "$profile" "$out/b.callgrind.out"
python3 - "$out/b.callgrind.out" <<'EOF'
import re, subprocess, sys
path = sys.argv[1]
names, callee, queries = {}, None, 0
for line in open(path):
    m = re.match(r'(c?)fn=\((\d+)\)(?: (.*))?', line)
    if m:
        if m.group(3):
            names[m.group(2)] = m.group(3).strip()
        callee = m.group(2) if m.group(1) else None
        continue
    m = re.match(r'calls=(\d+)', line)
    if m:
        if callee and names.get(callee, '').endswith('Aggregates::command'):
            queries += int(m.group(1))
        callee = None
totals = subprocess.run(['callgrind_annotate', path], capture_output=True, text=True, check=True).stdout
total = int(re.search(r'([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS', totals).group(1).replace(',', ''))
if queries == 0:
    sys.exit(f"callgrind-b.sh: no query in the window ({path})")
print(f"b under callgrind: {total:,} instructions / {queries:,} queries = {total / queries:,.0f} per query")
print(f"profile: {path} (callgrind_annotate --inclusive=yes {path})")
EOF
