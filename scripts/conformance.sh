#!/usr/bin/env bash
# Conformance against the server's own test suite: runs MariaDB's mysql-test-run.pl (Debian
# package mariadb-test) with --extern against a private server twice, directly and through
# rttscope, and prints one row per test: its result direct and proxied. Exits non-zero when a
# test that passes directly fails through rttscope.
#
#   scripts/conformance.sh                 the broad list (plain, --ps-protocol, --cursor-protocol,
#                                          --compress and --ssl runs)
#   scripts/conformance.sh --quick         the CI subset (a few minutes for both passes)
#   scripts/conformance.sh main.ps main.sp-cursor ...   these tests (plain; --modes to change)
#
# Options:
#   --quick            the CI subset of the list
#   --modes M[,M..]    only these modes: plain, ps, cursor, compress, ssl
#   --rttscope PATH    use this binary instead of building target/debug/rttscope
#   --release          build and use target/release/rttscope
#   --keep             keep the temp dir (server, logs, mtr vardirs) and print its path
#   --log LEVEL        rttscope's RUST_LOG (default: info; debug to see every command)
#   --list             print the test list with the modes each runs in, and exit
#   --direct-only      run only the direct pass (to check which tests pass against the server)
#
# The private server: mariadbd --no-defaults with its own datadir, socket and port in a temp
# dir, loopback only, MTR's usual options (latin1, local-infile, the std_data TLS certificate).
# rttscope listens on TCP and a Unix socket (tests that connect to "localhost" take the socket)
# and offers clients TLS with the same certificate, so --ssl runs verify as they do directly.
# Everything started here is stopped, and the temp dir removed, on exit.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MTR_DIR=/usr/share/mysql/mysql-test
MODES_ALL=(plain ps cursor compress ssl)

# The list: one test a line, the modes it runs in, and "quick" when it is in the CI subset.
# Chosen to cover the protocol: prepared statements and cursors (ps_*, sp-cursor), stored
# procedures and their multi-results, packet sizes, charsets, LOCAL INFILE, sessions
# (change_user, reset_connection, session tracking), the client library test program
# (mysql_client_test*), and the data types each protocol encodes. Every test here passes
# directly against the private server; tests that restart the server are out.
TEST_LIST="$(
  cat <<'EOF'
main.ps_1general                 plain ps cursor
main.ps_2myisam                  plain ps
main.ps_3innodb                  plain ps
main.ps_4heap                    plain ps
main.ps_5merge                   plain
main.ps_10nestset                plain ps
main.ps_11bugs                   plain ps cursor
main.ps_ddl                      plain ps
main.ps_ddl1                     plain
main.ps_grant                    plain
main.ps_innodb                   plain ps
main.ps_max_subselect-5113       plain ps cursor
main.ps_not_windows              plain
main.sp                          plain
main.sp-bugs                     plain
main.sp-bugs2                    plain
main.sp-condition-handler        plain
main.sp-cursor                   plain ps cursor compress quick
main.sp-dynamic                  plain ps
main.sp-error                    plain ps
main.sp-expr                     plain
main.sp-fib                      plain cursor
main.sp-for-loop                 plain cursor
main.sp-group                    plain
main.sp-innodb                   plain
main.sp-inout                    plain ps
main.sp-row                      plain
main.sp-vars                     ps cursor
main.sp-anchor-row-type-cursor   plain ps cursor
main.sp-anchor-row-type-table    plain
main.sp-anchor-type              plain
main.sp-prelocking               plain
main.sp-ucs2                     plain
main.sp_gis                      plain
main.sp_trans                    plain
main.sp-destruct                 plain
main.sp_missing_4665             plain
main.mysql_client_test_nonblock  plain
main.non_blocking_api            plain
main.mysql_protocols             plain
main.mysql                       plain
main.mysql_comments              plain
main.mysql_cp932                 plain
main.mysql-metadata              plain
main.mysql_binary_mode           plain
main.mysqltest_tracking_info     plain
main.packet                      plain compress ssl quick
main.client                      plain
main.compress                    plain
main.ssl_compress                plain
main.ssl_connect                 plain
main.change_user                 plain ssl quick
main.reset_connection            plain
main.connect-no-db               plain
main.loaddata                    plain ps compress quick
main.loadxml                     plain
main.outfile                     plain
main.outfile_loaddata            plain
main.ctype_utf8mb4               plain
main.ctype_latin1                plain
main.ctype_binary                plain
main.ctype_cp1251                plain
main.ctype_recoding              plain
main.ctype_collate               plain
main.ctype_errors                plain
main.ctype_create                plain
main.type_blob                   plain ps cursor compress
main.type_bit                    plain ps cursor
main.type_date                   plain ps cursor
main.type_datetime               plain ps cursor
main.type_datetime_hires         plain ps
main.type_decimal                plain ps cursor
main.type_float                  plain ps cursor
main.type_int                    plain
main.type_json                   plain ps
main.type_set                    plain
main.type_time                   plain ps cursor
main.type_time_hires             plain ps
main.type_timestamp              plain ps cursor
main.type_timestamp_hires        plain ps
main.type_varchar                plain
main.type_year                   plain
main.type_binary                 plain
main.type_char                   plain
main.type_varbinary              plain
main.type_uint                   plain
main.type_num                    plain
main.type_ranges                 plain
main.type_geometry_mix_int       plain
main.select                      plain
main.func_if                     plain
main.func_in                     plain
main.func_like                   plain
main.func_op                     plain
main.func_regexp                 plain
main.insert                      plain
main.delete_returning            plain ps cursor
main.delete                      plain
main.having                      plain
main.limit                       plain ps cursor
main.fetch_first                 plain ps cursor
main.cte_recursive               plain
main.cte_nonrecursive            plain
main.xa                          plain
main.errors                      plain ps quick
main.warnings                    plain ps quick
main.signal                      plain ps
main.metadata                    plain ps cursor quick
main.explain                     plain
main.analyze_stmt                plain
main.dyncol                      plain
main.strict                      plain
main.sql_mode                    plain
main.user_var                    plain
main.status                      plain
main.kill                        plain
main.lock                        plain
main.temp_table                  plain
main.truncate                    plain
main.alias                       plain
main.null                        plain
main.bigint                      plain
main.binary                      plain
main.bool                        plain
main.cast                        plain
main.case                        plain
main.count_distinct              plain
main.default                     plain
main.distinct                    plain
main.derived                     plain
main.progress_976225             plain
main.dirty_close                 plain
main.handler_read_last           plain
main.mysqlshow                   plain
main.mysqlslap                   plain
main.long_unique                 plain
main.row                         plain
main.negation_elimination        plain
main.odbc                        plain
main.olap                        plain
main.table_value_constr          plain ps cursor
main.func_math                   plain ps cursor
main.func_time                   plain ps cursor
main.func_group                  plain
main.func_json                   plain ps cursor
main.type_enum                   plain ps cursor
main.type_newdecimal             plain ps cursor
main.replace                     plain ps
main.bulk_replace                plain ps cursor
main.multi_update                plain ps
main.view                        plain ps cursor
main.read_only                   plain ps
EOF
)"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
  echo "conformance: $*" >&2
  exit 2
}

quick=0 keep=0 release=0 list_only=0 direct_only=0 rttscope_bin="" log_level="${RUST_LOG:-info}"
modes_filter=() explicit=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --keep) keep=1 ;;
    --release) release=1 ;;
    --list) list_only=1 ;;
    --direct-only) direct_only=1 ;;
    --modes) shift; IFS=, read -r -a modes_filter <<<"${1:?--modes needs a list}" ;;
    --modes=*) IFS=, read -r -a modes_filter <<<"${1#--modes=}" ;;
    --rttscope) shift; rttscope_bin="${1:?--rttscope needs a path}" ;;
    --rttscope=*) rttscope_bin="${1#--rttscope=}" ;;
    --log) shift; log_level="${1:?--log needs a level}" ;;
    --log=*) log_level="${1#--log=}" ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) explicit+=("$1") ;;
  esac
  shift
done
for m in "${modes_filter[@]}"; do
  [[ " ${MODES_ALL[*]} " == *" $m "* ]] || die "unknown mode $m: one of ${MODES_ALL[*]}"
done

# The runs: "mode test" pairs, in list order.
declare -A runs_by_mode=()
add_run() { runs_by_mode[$1]+="$2 "; }
mode_wanted() { [ ${#modes_filter[@]} -eq 0 ] || [[ " ${modes_filter[*]} " == *" $1 "* ]]; }
if [ ${#explicit[@]} -gt 0 ]; then
  [ ${#modes_filter[@]} -gt 0 ] || modes_filter=(plain)
  for t in "${explicit[@]}"; do
    [[ "$t" == *.* ]] || t="main.$t"
    for m in "${modes_filter[@]}"; do add_run "$m" "$t"; done
  done
else
  while read -r test rest; do
    [ -n "$test" ] || continue
    [ $quick -eq 0 ] || [[ " $rest " == *" quick "* ]] || continue
    for m in $rest; do
      [ "$m" != quick ] || continue
      [[ " ${runs_by_mode[$m]:-} " == *" $test "* ]] && continue
      if mode_wanted "$m"; then add_run "$m" "$test"; fi
    done
  done <<<"$TEST_LIST"
fi
total_runs=0
for m in "${MODES_ALL[@]}"; do
  for t in ${runs_by_mode[$m]:-}; do
    total_runs=$((total_runs + 1))
    [ $list_only -eq 0 ] || echo "$m $t"
  done
done
[ $list_only -eq 0 ] || exit 0
[ $total_runs -gt 0 ] || die "no tests selected"

# Dependencies: the test suite (mariadb-test), the server, the client.
if [ ! -f "$MTR_DIR/mysql-test-run.pl" ]; then
  echo "conformance: $MTR_DIR/mysql-test-run.pl is missing; installing mariadb-test"
  "$REPO/scripts/install-deps.sh" --conformance
  [ -f "$MTR_DIR/mysql-test-run.pl" ] || die "mariadb-test did not install $MTR_DIR/mysql-test-run.pl"
fi
find_bin() {
  local b
  for b in "$@"; do
    if command -v "$b" >/dev/null 2>&1; then command -v "$b"; return; fi
    for d in /usr/sbin /usr/bin; do [ -x "$d/$b" ] && { echo "$d/$b"; return; }; done
  done
  die "none of $* found; run scripts/install-deps.sh"
}
MARIADBD="$(find_bin mariadbd mysqld)"
INSTALL_DB="$(find_bin mariadb-install-db mysql_install_db)"
MARIADB="$(find_bin mariadb mysql)"

# rttscope: built here unless given.
if [ -z "$rttscope_bin" ]; then
  profile=debug cargo_profile=()
  [ $release -eq 0 ] || { profile=release; cargo_profile=(--release); }
  echo "==> conformance: building rttscope ($profile)"
  (cd "$REPO" && cargo build -j 1 --locked -p rttscope --bin rttscope "${cargo_profile[@]}" 2>&1 | tail -n 3)
  rttscope_bin="$REPO/target/$profile/rttscope"
fi
[ -x "$rttscope_bin" ] || die "no rttscope binary at $rttscope_bin"

# Everything we start goes in here; the trap stops it and removes it.
TMP="$(mktemp -d "${TMPDIR:-/tmp}/rttscope-conformance.XXXXXX")"
server_pid="" proxy_pid="" mtr_pid=""
stop_pid() {
  local pid=$1 i
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  # mtr runs in a process group of its own (setsid): it, its workers and the mysqltest they run.
  if [ -n "$mtr_pid" ]; then kill -TERM -- "-$mtr_pid" 2>/dev/null || true; fi
  stop_pid "$proxy_pid"
  stop_pid "$server_pid"
  if [ $keep -eq 1 ]; then
    echo "conformance: kept $TMP"
  else
    rm -rf "$TMP"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
SERVER_PORT="$(free_port)"
PROXY_PORT="$(free_port)"
ADMIN_PORT="$(free_port)"
SERVER_SOCK="$TMP/mysqld.sock"
PROXY_SOCK="$TMP/rttscope.sock"
as_root=()
[ "$(id -u)" -ne 0 ] || as_root=(--user=root)

# One vardir for every run, laid out as mtr lays out its own: the server's datadir is
# VAR/mysqld.1/data beside VAR/std_data, because tests name files relative to the datadir
# ('../../std_data/loaddata1.dat') and mysqltest only removes files under the vardir.
VAR="$TMP/var"
DATA="$VAR/mysqld.1/data"
mkdir -p "$VAR/mysqld.1" "$VAR/log" "$VAR/run" "$VAR/tmp" "$TMP/logs"
cp -r "$MTR_DIR/std_data" "$VAR/std_data"
# A private copy of the suite (a tree of symlinks) to run mtr from: mysqltest writes its .reject
# files beside the results, and those belong in our temp dir, not in /usr/share.
MTR_TREE="$TMP/usr/share/mysql/mysql-test"
mkdir -p "$TMP/usr/share/mysql"
for f in /usr/*; do
  if [ "$f" != /usr/share ]; then ln -s "$f" "$TMP/usr/"; fi
done
for f in /usr/share/mysql/*; do
  if [ "$f" != "$MTR_DIR" ]; then ln -s "$f" "$TMP/usr/share/mysql/"; fi
done
cp -rs "$MTR_DIR" "$MTR_TREE"
echo "==> conformance: private MariaDB on 127.0.0.1:$SERVER_PORT ($TMP)"
"$INSTALL_DB" --no-defaults --datadir="$DATA" --auth-root-authentication-method=normal \
  --skip-name-resolve --innodb-log-file-size=10M "${as_root[@]}" >"$TMP/install-db.log" 2>&1 \
  || { cat "$TMP/install-db.log" >&2; die "mariadb-install-db failed"; }
client=("$MARIADB" --no-defaults --user=root --socket="$SERVER_SOCK")

start_server() {
  # MTR's own server options (include/default_mysqld.cnf) where results depend on them, its
  # default time zone (TZ=GMT-3, mtr_cases.pm), a binary log as the tests that need one ask for
  # it, and what mysql_client_test's .opt asks for (big packets, the PROXY protocol). Names are
  # resolved: grants to user@localhost must match clients on 127.0.0.1. --log-basename comes
  # first, or it would move the error log.
  TZ=GMT-3 "$MARIADBD" --no-defaults "${as_root[@]}" --datadir="$DATA" --socket="$SERVER_SOCK" \
    --port="$SERVER_PORT" --bind-address=127.0.0.1 --pid-file="$TMP/mysqld.pid" \
    --log-basename=mysqld --log-error="$VAR/log/mysqld.1.err" --tmpdir="$TMP" \
    --secure-file-priv="$VAR" --local-infile=1 --character-set-server=latin1 \
    --collation-server=latin1_swedish_ci --connect-timeout=60 --log-bin-trust-function-creators=1 \
    --log-bin=mysqld-bin --server-id=1 \
    --key-buffer-size=1M --sort-buffer-size=256K --max-heap-table-size=1M \
    --default-storage-engine=myisam --use-stat-tables=preferably --histogram-type=json_hb \
    --innodb-log-file-size=10M --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=0 \
    --innodb-use-native-aio=0 --max-connections=300 --plugin-maturity=unknown \
    --max-allowed-packet=32000000 --proxy-protocol-networks='*' \
    --ssl-ca="$MTR_DIR/std_data/cacert.pem" --ssl-cert="$MTR_DIR/std_data/server-cert.pem" \
    --ssl-key="$MTR_DIR/std_data/server-key.pem" >>"$TMP/mysqld.stdout" 2>&1 &
  server_pid=$!
  local i
  for i in $(seq 1 300); do
    "${client[@]}" -e 'SELECT 1' >/dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || { tail -n 30 "$VAR/log/mysqld.1.err" >&2; die "mariadbd exited at start"; }
    sleep 0.1
  done
  die "mariadbd did not answer within 30 s (see $VAR/log/mysqld.1.err)"
}

# Each mtr run gets the server as it was before any test: neither pass sees what the other left.
restart_server() {
  stop_pid "$server_pid"
  server_pid=""
  rm -rf "$DATA"
  cp -a "$TMP/data.pristine" "$DATA"
  start_server
}

start_server
# What mysql-test-run.pl's bootstrap gives every test: no anonymous users, the test database,
# the test time zones, and the mtr database with its suppression and check procedures.
{
  echo "DELETE FROM mysql.global_priv WHERE user = ''; FLUSH PRIVILEGES;"
  echo "CREATE DATABASE IF NOT EXISTS test CHARACTER SET latin1 COLLATE latin1_swedish_ci;"
  echo "USE mysql;"
  cat /usr/share/mysql/mysql_test_data_timezone.sql
  echo "ALTER TABLE mysql.gtid_slave_pos ENGINE=Aria transactional=0;"
  echo "CREATE DATABASE mtr CHARSET=latin1;"
  # As mtr's sql_to_bootstrap reads them: "--" lines are comments, even without a space.
  for f in mtr_warnings.sql mtr_check.sql; do
    sed -E '/^[[:space:]]*--/d; s/^delimiter \|\|;$/DELIMITER ||/' "$MTR_DIR/include/$f"
    printf '\n||\nDELIMITER ;\n'
  done
  # mtr restarts a server whose test left something behind (check-testcases); with --extern it
  # cannot, so before each test this undoes what earlier tests left: schemas, users and roles,
  # changed global variables.
  cat <<'SQL'
CREATE TABLE mtr.conformance_accounts AS SELECT user, host FROM mysql.global_priv;
CREATE TABLE mtr.conformance_globals AS
  SELECT variable_name, global_value, variable_type FROM information_schema.system_variables
   WHERE global_value IS NOT NULL AND read_only = 'NO'
     AND variable_name NOT LIKE 'GTID%' AND variable_name NOT LIKE 'WSREP%';
DELIMITER ||
CREATE PROCEDURE mtr.conformance_reset()
BEGIN
  DECLARE done INT DEFAULT 0;
  DECLARE stmt TEXT;
  DECLARE c CURSOR FOR
    SELECT CONCAT('DROP DATABASE `', schema_name, '`') FROM information_schema.schemata
     WHERE schema_name NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys', 'mtr')
    UNION ALL
    SELECT CONCAT(IF(JSON_VALUE(p.priv, '$.is_role') = 'true', 'DROP ROLE ', 'DROP USER '),
                  QUOTE(p.user), IF(JSON_VALUE(p.priv, '$.is_role') = 'true', '', CONCAT('@', QUOTE(p.host))))
      FROM mysql.global_priv p LEFT JOIN mtr.conformance_accounts a USING (user, host)
     WHERE a.user IS NULL
    UNION ALL
    SELECT CONCAT('SET GLOBAL ', g.variable_name, ' = ',
                  IF(g.variable_type REGEXP 'INT|DOUBLE|DECIMAL|FLOAT', g.global_value, QUOTE(g.global_value)))
      FROM mtr.conformance_globals g JOIN information_schema.system_variables v USING (variable_name)
     WHERE NOT (v.global_value <=> g.global_value);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1;
  DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
  OPEN c;
  l: LOOP
    FETCH c INTO stmt;
    IF done THEN LEAVE l; END IF;
    EXECUTE IMMEDIATE stmt;
  END LOOP;
  CLOSE c;
  CREATE DATABASE IF NOT EXISTS test CHARACTER SET latin1 COLLATE latin1_swedish_ci;
END||
DELIMITER ;
SQL
} >"$TMP/bootstrap.sql"
"${client[@]}" <"$TMP/bootstrap.sql" >"$TMP/bootstrap.log" 2>&1 \
  || { cat "$TMP/bootstrap.log" >&2; die "loading mtr's bootstrap SQL failed"; }
stop_pid "$server_pid"
server_pid=""
cp -a "$DATA" "$TMP/data.pristine"
start_server

# The client programs mtr runs, from a directory of our own (--client-bindir) where
# mariadb-test first resets the server (mtr.conformance_reset, directly over its socket).
mkdir "$TMP/bin"
for f in /usr/bin/mariadb* /usr/bin/mysql* /usr/bin/my_print_defaults /usr/bin/perror \
  /usr/bin/replace /usr/bin/innochecksum /usr/bin/mariabackup /usr/bin/mbstream /usr/bin/aria_* \
  /usr/bin/myisam* /usr/bin/resolveip /usr/bin/wsrep_*; do
  if [ -e "$f" ]; then ln -sf "$f" "$TMP/bin/"; fi
done
rm -f "$TMP/bin/mariadb-test" "$TMP/bin/mysqltest"
cat >"$TMP/bin/mariadb-test" <<WRAPPER
#!/bin/sh
"$MARIADB" --no-defaults --user=root --socket="$SERVER_SOCK" -e 'CALL mtr.conformance_reset()' \\
  >>"$TMP/reset.log" 2>&1 || echo "conformance: resetting the server before a test failed" >&2
exec "$(find_bin mariadb-test mysqltest)" "\$@"
WRAPPER
chmod +x "$TMP/bin/mariadb-test"
ln -s mariadb-test "$TMP/bin/mysqltest"

echo "==> conformance: rttscope on 127.0.0.1:$PROXY_PORT and $PROXY_SOCK -> $SERVER_PORT"
cat >"$TMP/rttscope.yaml" <<EOF
listen:
  address: [127.0.0.1:$PROXY_PORT, unix:$PROXY_SOCK]
  tls: {mode: offered, cert: $MTR_DIR/std_data/server-cert.pem, key: $MTR_DIR/std_data/server-key.pem}
admin: 127.0.0.1:$ADMIN_PORT
upstream:
  address: 127.0.0.1:$SERVER_PORT
  tls: {mode: preferred}
  compression: mirror
EOF
RUST_LOG="$log_level" "$rttscope_bin" --config "$TMP/rttscope.yaml" >"$TMP/rttscope.log" 2>&1 &
proxy_pid=$!
for i in $(seq 1 300); do
  "$MARIADB" --no-defaults --user=root --host=127.0.0.1 --port="$PROXY_PORT" -e 'SELECT 1' \
    >/dev/null 2>&1 && break
  kill -0 "$proxy_pid" 2>/dev/null || { cat "$TMP/rttscope.log" >&2; die "rttscope exited at start"; }
  [ "$i" -lt 300 ] || die "rttscope did not answer within 30 s (see $TMP/rttscope.log)"
  sleep 0.1
done

mode_flag() {
  case "$1" in
    plain) ;;
    ps) echo --ps-protocol ;;
    cursor) echo --cursor-protocol ;;
    compress) echo --compress ;;
    ssl) ;; # see run_mtr
  esac
}

# One mtr run: target (direct|proxied), mode. Results go to $TMP/results.<target>: "mode test result".
run_mtr() {
  local target=$1 mode=$2 port sock
  if [ "$target" = direct ]; then port=$SERVER_PORT sock=$SERVER_SOCK; else port=$PROXY_PORT sock=$PROXY_SOCK; fi
  local tests
  read -r -a tests <<<"${runs_by_mode[$mode]}"
  echo "==> conformance: $target, $mode: ${#tests[@]} tests"
  # --extern: no server of mtr's own; --force: go on past failures; --retry=0: a flaky pass
  # through the proxy must not hide a failure. The proxy's log is marked at each run's start.
  echo "=== conformance: $target $mode $(date -u +%FT%TZ)" >>"$TMP/rttscope.log"
  local flag
  flag="$(mode_flag "$mode")"
  # mtr's --ssl wants a server variable that only its own servers have; TLS for every client
  # of the run through the [client] group that --extern writes does the same.
  local tls=()
  [ "$mode" != ssl ] || tls=(--extern ssl=1 --extern ssl-ca="$MTR_DIR/std_data/cacert.pem")
  restart_server
  # shellcheck disable=SC2016 # $1 is the inner shell's
  setsid sh -c 'cd "$1" && shift && exec perl ./mysql-test-run.pl "$@"' mtr "$MTR_TREE" \
    --extern host=127.0.0.1 --extern port="$port" --extern socket="$sock" --extern user=root \
    "${tls[@]}" --vardir="$VAR" --tmpdir="$VAR/tmp" --client-bindir="$TMP/bin" \
    --force --max-test-fail=0 --parallel=1 --retry=0 --retry-failure=0 --nocheck-testcases \
    --nowarnings --testcase-timeout=5 --suite-timeout=120 ${flag:+"$flag"} "${tests[@]}" \
    >"$TMP/mtr-$target-$mode.out" 2>&1 &
  mtr_pid=$!
  wait "$mtr_pid" || true
  mtr_pid=""
  mv "$VAR/log" "$TMP/logs/$target-$mode"
  rm -rf "$VAR/tmp"
  mkdir -p "$VAR/log" "$VAR/tmp"
  # "main.ps    [ pass ]   123", "main.x   [ fail ]", "[ skipped ] reason", with or without a
  # worker prefix.
  sed -nE 's/^(w[0-9]+ )?([a-z0-9_]+\.[A-Za-z0-9_.-]+)( '"'"'[^'"'"']*'"'"')?[[:space:]]+\[ ([a-z-]+) \].*/\2 \4/p' \
    "$TMP/mtr-$target-$mode.out" | while read -r t r; do echo "$mode $t $r"; done >>"$TMP/results.$target"
  local n
  n="$(grep -c "^$mode " "$TMP/results.$target" || true)"
  [ "$n" -gt 0 ] || { tail -n 20 "$TMP/mtr-$target-$mode.out" >&2; echo "conformance: mtr reported no results for $target $mode" >&2; }
}

: >"$TMP/results.direct"
: >"$TMP/results.proxied"
started=$(date +%s)
targets=(direct proxied)
[ $direct_only -eq 0 ] || targets=(direct)
for target in "${targets[@]}"; do
  for mode in "${MODES_ALL[@]}"; do
    [ -n "${runs_by_mode[$mode]:-}" ] || continue
    run_mtr "$target" "$mode"
  done
done

# The table, and the verdict.
result_of() { awk -v m="$1" -v t="$2" '$1 == m && $2 == t { r = $3 } END { print (r == "" ? "none" : r) }' "$3"; }
regressions=()
declare -A count=()
printf '\n%-40s %-9s %-10s %-10s\n' test mode direct proxied
for mode in "${MODES_ALL[@]}"; do
  for t in ${runs_by_mode[$mode]:-}; do
    d="$(result_of "$mode" "$t" "$TMP/results.direct")"
    p="$(result_of "$mode" "$t" "$TMP/results.proxied")"
    mark=""
    [ $direct_only -eq 0 ] || p="-"
    if [ "$d" = pass ] && [ "$p" != pass ] && [ $direct_only -eq 0 ]; then
      mark="  <-- fails through rttscope"
      regressions+=("$mode $t")
    fi
    printf '%-40s %-9s %-10s %-10s%s\n' "$t" "$mode" "$d" "$p" "$mark"
    count[direct_$d]=$((${count[direct_$d]:-0} + 1))
    count[proxied_$p]=$((${count[proxied_$p]:-0} + 1))
  done
done
echo
echo "conformance: $total_runs runs in $(($(date +%s) - started)) s;" \
  "direct: ${count[direct_pass]:-0} pass, ${count[direct_fail]:-0} fail, ${count[direct_skipped]:-0} skipped;" \
  "proxied: ${count[proxied_pass]:-0} pass, ${count[proxied_fail]:-0} fail, ${count[proxied_skipped]:-0} skipped"
# rttscope's warnings (not its findings: the suite's loops are findings by design), without
# colours, timestamps and per-connection fields, counted.
sed 's/\x1b\[[0-9;]*m//g' "$TMP/rttscope.log" | grep -E '^[^ ]+ +(WARN|ERROR) ' \
  | grep -v 'rttscope::findings' >"$TMP/rttscope.warnings" || true
warnings="$(wc -l <"$TMP/rttscope.warnings")"
if [ "$warnings" -gt 0 ]; then
  echo "conformance: rttscope logged $warnings warnings/errors; the distinct ones:"
  sed -E 's/^[^ ]+ +//; s/conn\{[^}]*\}//; s/(conn\.id|elapsed_ms)=[0-9]+//g' "$TMP/rttscope.warnings" \
    | cut -c1-300 | sort | uniq -c | sort -rn | head -n 20
fi
if [ ${#regressions[@]} -gt 0 ]; then
  echo "conformance: ${#regressions[@]} passed directly and failed through rttscope:"
  for r in "${regressions[@]}"; do
    read -r mode t <<<"$r"
    echo "  $t ($mode): reproduce with scripts/conformance.sh --modes $mode --log debug --keep $t"
    grep -A 12 -E "^$t .*\[ fail \]" "$TMP/mtr-proxied-$mode.out" | sed -n '2,13s/^/      /p'
  done
  exit 1
fi
[ $direct_only -eq 1 ] || echo "conformance: every test that passes directly passes through rttscope"
