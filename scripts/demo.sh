#!/usr/bin/env bash
# rttscope in one command: emulate a database 15 ms away in front of the local MariaDB, run a
# small shop application through it (scripts/demo-workload.sh: an N+1 loop, one INSERT per row,
# LIMIT/OFFSET paging) and print the report rttscope writes about it.
#
#   scripts/demo.sh                    # report to stdout and to target/demo/report.txt
#   scripts/demo.sh -o FILE            # ... to FILE instead
#   scripts/demo.sh --update-readme    # ... and make it README.md's sample report (the
#                                      # summary, findings and profile; --readme FILE: another file)
#
# The database: DEMO_DB (host:port, default 127.0.0.1:3306), DEMO_USER (root) and
# DEMO_PASSWORD (empty); the user must be allowed to create the schema rttscope_demo, which
# the demo drops again at the end. DEMO_RTTSCOPE names an rttscope binary to use instead of
# building this workspace's (debug build: `cargo build -p rttscope`).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$repo/target/demo/report.txt
update_readme=false
readme=$repo/README.md
while [ $# -gt 0 ]; do
	case $1 in
	-o) out=${2:?-o needs a file}; shift 2 ;;
	--update-readme) update_readme=true; shift ;;
	--readme) readme=${2:?--readme needs a file}; shift 2 ;;
	-h | --help) sed -n '2,14p' "$0" | cut -c3-; exit 0 ;;
	*) echo "demo.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done

db=${DEMO_DB:-127.0.0.1:3306}
user=${DEMO_USER:-root}
password=${DEMO_PASSWORD:-}
rtt=15ms

# shellcheck source=scripts/demo-workload.sh
. "$repo/scripts/demo-workload.sh"

if [ -n "${DEMO_RTTSCOPE:-}" ]; then
	rttscope=$DEMO_RTTSCOPE
else
	echo "demo: building rttscope (cargo build -p rttscope)" >&2
	(cd "$repo" && cargo build --quiet -p rttscope --bin rttscope)
	rttscope=$repo/target/debug/rttscope
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rttscope-demo.XXXXXX")
pid=
direct=(mariadb --no-defaults --protocol=TCP --host="${db%:*}" --port="${db##*:}" --user="$user"
	--password="$password" --skip-ssl)
cleanup() {
	# Everything the demo started or made: rttscope, its files, the demo schema.
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	"${direct[@]}" --batch -e "DROP DATABASE IF EXISTS $DEMO_SCHEMA" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Port 0 and no admin API: the demo takes no port anyone else might be using. The report is
# the one rttscope writes when it stops.
cat >"$work/rttscope.yaml" <<-YAML
	listen: 127.0.0.1:0
	admin: off
	upstream: $db
	report: {path: $work/report.txt, format: text}
	inject:
	  rtt: $rtt
YAML
"$rttscope" --config "$work/rttscope.yaml" 2>"$work/rttscope.log" &
pid=$!
listen=
for _ in $(seq 100); do
	listen=$(sed -n 's/.*rttscope ready listen=\([^ ]*\).*/\1/p' "$work/rttscope.log")
	[ -n "$listen" ] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$listen" ]; then
	echo "demo: rttscope did not start:" >&2
	cat "$work/rttscope.log" >&2
	exit 1
fi
echo "demo: rttscope on $listen, emulating a database $rtt away in front of $db" >&2

demo_setup "${direct[@]}"
demo_app mariadb --no-defaults --protocol=TCP --host="${listen%:*}" --port="${listen##*:}" --user="$user" \
	--password="$password" --skip-ssl

# SIGTERM: rttscope finishes, writes the report and exits.
kill -TERM "$pid"
wait "$pid" || { echo "demo: rttscope exited with $?:" >&2; cat "$work/rttscope.log" >&2; exit 1; }
pid=

mkdir -p "$(dirname "$out")"
cp "$work/report.txt" "$out"
cat "$out"
echo "demo: report written to $out" >&2

if $update_readme; then
	# The block between the markers becomes this report up to its per-statement details, in
	# a code block. integration-tests/tests/demo.rs checks the block against a fresh run.
	sed '/^# Statement 1:/,$d' "$out" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$work/sample.txt"
	grep -q '^<!-- demo:begin -->$' "$readme" && grep -q '^<!-- demo:end -->$' "$readme" \
		|| { echo "demo: README.md has no <!-- demo:begin --> / <!-- demo:end --> block" >&2; exit 1; }
	awk -v report="$work/sample.txt" '
		/^<!-- demo:begin -->$/ { print; print "```"; while ((getline line < report) > 0) print line; print "```"; skip = 1; next }
		/^<!-- demo:end -->$/ { skip = 0 }
		!skip
	' "$readme" >"$work/README.md"
	cp "$work/README.md" "$readme"
	echo "demo: README.md's sample report updated" >&2
fi
