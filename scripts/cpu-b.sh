#!/usr/bin/env bash
# Where workload b's CPU goes, per query, through rttscope and through HAProxy in one run of
# `rttscope-bench --only b` (prepared point selects on 8 connections). callgrind counts only
# a proxy's own instructions; on b both proxies spend most of their time in the kernel, and
# the client and the server share the same two CPUs, so this prints for each side:
#
# CPU µs per query of the proxy (each thread), the bench's client, the server, and the
# machine's idle time; and context switches per query, voluntary and not (from /proc, over
# 4-5 s of each side's timed run). For where a proxy's own time goes, kernel included:
# `perf record -e cpu-clock -g -p PID` (no hardware counters in this VM; cpu-clock works).
#
# The queries in a window are the server's `Com_stmt_execute` difference, so it runs
# against the server RTTSCOPE_TEST_MYSQL_URL names (default: 127.0.0.1:3306), which must run
# on this machine (its CPU is read from the `mariadbd` process) and let root in without a
# password, and nothing else may run queries there meanwhile.
#
# Usage: scripts/cpu-b.sh [OUT_DIR]   (default target/bench/cpu-b)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=$(realpath -m "${1:-target/bench/cpu-b}")
mkdir -p "$out"
for tool in mariadb haproxy; do
  command -v "$tool" >/dev/null || { echo "cpu-b.sh: $tool not found" >&2; exit 1; }
done
export RTTSCOPE_TEST_MYSQL_URL=${RTTSCOPE_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/}
hostport=${RTTSCOPE_TEST_MYSQL_URL#*://}
hostport=${hostport#*@}
hostport=${hostport%%/*}
host=${hostport%:*}
port=${hostport##*:}
executes() {
  mariadb --no-defaults -h "$host" -P "$port" -u root -N -e "SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'" | cut -f2
}
executes >/dev/null || { echo "cpu-b.sh: cannot read Com_stmt_execute at $host:$port" >&2; exit 1; }
cargo build --quiet --release -p rttscope -p rttscope-benches

# One line per thread of each party: role, thread name, voluntary and involuntary
# switches, CPU ticks; then the machine's idle ticks.
snapshot() { # proxy_pid
  python3 - "$1" "$(pgrep -n -x rttscope-bench)" "$(pgrep -n -x mariadbd)" <<'EOF'
import os, sys, time
# One process for all threads: quick, so the window is what it says, and a thread that
# ends while it reads is left out rather than ending the script.
for role, pid in zip(('proxy', 'client', 'server'), sys.argv[1:]):
    for tid in os.listdir(f'/proc/{pid}/task'):
        t = f'/proc/{pid}/task/{tid}'
        try:
            name = open(f'{t}/comm').read().strip().replace(' ', '_')
            status = dict(l.split(':', 1) for l in open(f'{t}/status') if ':' in l)
            stat = open(f'{t}/stat').read().rsplit(')', 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        # utime and stime: fields 14 and 15 of stat, 12 and 13 after the name.
        print(role, name, int(status['voluntary_ctxt_switches']), int(status['nonvoluntary_ctxt_switches']),
              int(stat[11]) + int(stat[12]))
cpu = open('/proc/stat').readline().split()
print('idle -', 0, 0, int(cpu[4]) + int(cpu[5]))
# When these counts were read (the reading itself takes a while on a loaded machine).
print('at', time.clock_gettime(time.CLOCK_BOOTTIME))
EOF
}

log="$out/bench.log"
./target/release/rttscope-bench --only b --no-raw-pipe --rounds 1 --duration 12s \
  --proxy-bin "$PWD/target/release/rttscope" --out-dir "$out" >"$log" 2>&1 &
bench=$!
trap 'kill "$bench" 2>/dev/null || true' EXIT

for side in rttscope HAProxy; do
  for _ in $(seq 1 300); do
    grep -q "b. round 1/1: .* through $side" "$log" && break
    kill -0 "$bench" 2>/dev/null || { cat "$log" >&2; echo "cpu-b.sh: the bench ended early" >&2; exit 1; }
    sleep 0.5
  done
  if [ "$side" = rttscope ]; then
    pid=$(pgrep -n -f "^$PWD/target/release/rttscope ") || { echo "cpu-b.sh: no rttscope running" >&2; exit 1; }
  else
    pid=$(pgrep -n -x haproxy) || { echo "cpu-b.sh: no haproxy running" >&2; exit 1; }
  fi
  sleep 1.5
  # The server's counter and the snapshot are read a second or more apart on the loaded
  # machine, so each is a rate over its own span (/proc/uptime and CLOCK_BOOTTIME are the
  # same clock), and a figure per query is the one rate over the other.
  q0=$(executes)
  t0=$(awk '{print $1}' /proc/uptime)
  snapshot "$pid" >"$out/$side.before"
  sleep 4
  q1=$(executes)
  t1=$(awk '{print $1}' /proc/uptime)
  snapshot "$pid" >"$out/$side.after"
  python3 - "$out" "$side" $((q1 - q0)) "$t0" "$t1" <<'EOF'
import os, sys
out, side, queries = sys.argv[1], sys.argv[2], int(sys.argv[3])
seconds = float(sys.argv[5]) - float(sys.argv[4])
tick_us = 1e6 / os.sysconf('SC_CLK_TCK')

def load(path):
    rows = {}
    for line in open(path):
        if line.startswith('at '):
            rows['at'] = float(line.split()[1])
            continue
        role, name, vol, invol, ticks = line.split()
        # The proxy by thread; the client and the server as wholes.
        key = f"{side} {name}" if role == 'proxy' else {'client': 'client (bench)'}.get(role, role)
        old = rows.get(key, (0, 0, 0))
        rows[key] = (old[0] + int(vol), old[1] + int(invol), old[2] + int(ticks))
    return rows

if queries <= 0:
    sys.exit(f"cpu-b.sh: no query reached the server during {side}'s window (is it the server the bench uses?)")
before, after = load(f"{out}/{side}.before"), load(f"{out}/{side}.after")
# Counts over the snapshots' span, scaled to the counter's: per query at the same rate.
scale = seconds / (after.pop('at') - before.pop('at'))
print(f"{side}: {queries:,} queries in {seconds:.1f} s ({queries / seconds:,.0f} q/s)")
print(f"  {'':<28} {'CPU µs/query':>12} {'switches/query (vol / invol)':>30}")
for who in sorted(after, key=lambda w: (w == 'idle', w)):
    vol, invol, ticks = ((a - b) * scale for a, b in zip(after[who], before.get(who, (0, 0, 0))))
    if ticks == 0 and vol == 0 and invol == 0:
        continue
    switches = '' if who == 'idle' else f"{vol / queries:.2f} / {invol / queries:.2f}"
    print(f"  {who[:28]:<28} {ticks * tick_us / queries:>12.2f} {switches:>30}")
EOF
done
wait "$bench"
trap - EXIT
