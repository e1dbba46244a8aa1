//! Unmodified real clients get through rttscope exactly what they get without it: each workload
//! runs straight to the server and through a proxy, and the two outputs must be identical.
//!
//! The clients: Connector/C (libmariadb, through ctypes) and Connector/Python, PyMySQL, the
//! `mariadb` CLI (batch and, on a pty, interactive), `mariadb-admin` and `mariadb-binlog`.
//! Between them they send what mysql_async never does: COM_STMT_FETCH on server-side cursors,
//! COM_FIELD_LIST, COM_STATISTICS, COM_REFRESH, COM_DEBUG, COM_CHANGE_USER,
//! COM_RESET_CONNECTION, COM_INIT_DB, COM_BINLOG_DUMP, and LOCAL INFILE uploads.

use std::fs::File;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rttscope_integration_tests::clients::{self, Output, assert_same, direct_and_proxied, is_mariadb, mask_digits};
use rttscope_integration_tests::mariadb::{ADMIN, DB, ED25519, NATIVE, OTHER, TestDb};
use rttscope_integration_tests::proxy::TestProxy;
use rttscope_integration_tests::skip;

const LIMIT: Duration = Duration::from_secs(120);

/// Runs SQL as `rtt_admin` straight to the server (batch mode, no column names).
fn admin_sql(sql: &str) -> String {
    let db = TestDb::shared();
    let mut cmd = db.mariadb_cli(db.upstream_addr(), ADMIN.user, ADMIN.password, Some(DB));
    cmd.args(["-N", "--default-character-set=utf8mb4", "-e", sql]);
    let out = clients::run(cmd, LIMIT).expect("mariadb CLI runs");
    assert!(out.status.success(), "{sql}: {}", out.stderr);
    out.stdout
}

/// Runs a script of `integration-tests/python/` with `mode` (leading arguments), the connection
/// arguments for `rtt_native` at `addr`, then `extra` flags; its stdout.
fn python(script: &str, addr: SocketAddr, mode: &[&str], extra: &[(&str, &str)]) -> String {
    let mut args: Vec<String> = mode.iter().map(|s| s.to_string()).collect();
    args.extend(clients::conn_args(addr, NATIVE));
    args.extend(extra.iter().flat_map(|(flag, value)| [flag.to_string(), value.to_string()]));
    clients::run_python(script, &args).unwrap_or_else(|e| panic!("{e:#}"))
}

fn run_checked(cmd: Command) -> Output {
    let out = clients::run(cmd, LIMIT).expect("client runs");
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    out
}

#[test]
fn server_side_cursor_fetches_match_direct() {
    if !is_mariadb() {
        return;
    }
    let setup = python("cursor_fetch.py", TestDb::shared().upstream_addr(), &["setup"], &[]);
    assert!(setup.contains("setup rows=10000"), "{setup}");
    // capi: Connector/C asks for N rows a COM_STMT_FETCH; connector: Connector/Python, one row a
    // fetch unbuffered, all rows in one fetch buffered.
    for mode in
        [&["capi", "--prefetch", "100"][..], &["capi", "--prefetch", "1"], &["connector"], &["connector", "--buffered"]]
    {
        let (direct, proxied) = direct_and_proxied(|addr| python("cursor_fetch.py", addr, mode, &[]));
        assert_same(&format!("cursor_fetch.py {mode:?}"), &direct, &proxied);
        assert!(direct.contains("rows=10000"), "{direct}");
        let fetches: u64 = direct
            .lines()
            .find_map(|l| l.strip_prefix("COM_STMT_FETCH on this connection: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(fetches >= 1, "no COM_STMT_FETCH was sent: {direct}");
        println!("{mode:?}:\n{direct}");
    }
}

#[test]
fn connector_python_binary_protocol_matches_direct() {
    if !is_mariadb() {
        return;
    }
    let users = [
        ("--other-user", OTHER.user),
        ("--other-password", OTHER.password),
        ("--admin-user", ADMIN.user),
        ("--admin-password", ADMIN.password),
    ];
    let (direct, proxied) = direct_and_proxied(|addr| python("mariadb_suite.py", addr, &[], &users));
    assert_same("mariadb_suite.py", &direct, &proxied);
    for expected in ["binary row (5,", "callproc result 3 outparams=True", "changed user to ('rtt_other')", "done"] {
        assert!(direct.contains(expected), "{expected:?} missing:\n{direct}");
    }
}

/// Connector/C's API for the legacy commands: COM_FIELD_LIST, COM_PROCESS_INFO, COM_SET_OPTION,
/// COM_STMT_SEND_LONG_DATA (no answer; a chunk over 16 MiB), COM_STMT_RESET, COM_REFRESH,
/// COM_STATISTICS, COM_INIT_DB, COM_CHANGE_USER (with an auth switch), COM_RESET_CONNECTION.
#[test]
fn connector_c_legacy_commands_match_direct() {
    let db = TestDb::shared();
    if !is_mariadb() || !db.has_ed25519() {
        return;
    }
    let users = [
        ("--other-user", OTHER.user),
        ("--other-password", OTHER.password),
        ("--ed25519-user", ED25519.user),
        ("--ed25519-password", ED25519.password),
    ];
    let (direct, proxied) = direct_and_proxied(|addr| python("capi_suite.py", addr, &[], &users));
    assert_same("capi_suite.py", &direct, &proxied);
    for expected in [
        "capi_fields.name type=253",
        "own row: user=b'rtt_native'",
        "id=2 sent=16793603 bytes",
        "change_user rtt_ed25519 [[(b'rtt_ed25519@",
        "done",
    ] {
        assert!(direct.contains(expected), "{expected:?} missing:\n{direct}");
    }
}

#[test]
fn pymysql_transcript_matches_direct() {
    if !is_mariadb() {
        return;
    }
    let (direct, proxied) = direct_and_proxied(|addr| python("pymysql_suite.py", addr, &[], &[]));
    assert_same("pymysql_suite.py", &direct, &proxied);
    for expected in [
        "load data rowcount 30000",
        "unbuffered rows 50000",
        "callproc cols=['third_set']",
        "row of 16777211 [(<str len=16777211",
        "COM_TIME error OperationalError (1047",
        "done",
    ] {
        assert!(direct.contains(expected), "{expected:?} missing:\n{direct}");
    }
}

/// A script with `\G`, DELIMITER, a procedure returning two result sets, multi-statements,
/// warnings, `use` (COM_INIT_DB), LOAD DATA LOCAL INFILE, `status` (COM_STATISTICS) and an error
/// that `--force` steps over. With `--compress` both legs are compressed (rttscope mirrors the
/// client's compression; tests/compression.rs checks each leg), with the same output.
#[test]
fn mariadb_cli_script_matches_direct() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("load.tsv");
    std::fs::write(&data, "1\tone\t2024-01-01\n2\ttwo ü😀\t\\N\n3\tthree\t2024-03-03\n").unwrap();
    let script = dir.path().join("script.sql");
    let sql = include_str!("../python/cli_script.sql").replace("@DATA@", &data.to_string_lossy());
    std::fs::write(&script, sql).unwrap();
    for extra in [None, Some("--compress")] {
        let ((stdout, stderr), proxied) = direct_and_proxied(|addr| cli_script(addr, &script, extra));
        assert_same(&format!("mariadb CLI {extra:?} stdout"), &stdout, &proxied.0);
        assert_same(&format!("mariadb CLI {extra:?} stderr"), &stderr, &proxied.1);
        assert!(stderr.contains("ERROR 1146 (42S02)"), "{stderr}");
        for expected in [
            "| ü😀 ",
            "name: two ü😀",
            "| first_result |",
            "Warning (Code 1062)",
            "| information_schema |",
            "| after the error |",
            "Uptime:",
        ] {
            assert!(stdout.contains(expected), "{expected:?} missing:\n{stdout}");
        }
    }
}

/// The CLI's stdout (what legitimately differs masked) and stderr for `script`.
fn cli_script(addr: SocketAddr, script: &std::path::Path, extra: Option<&str>) -> (String, String) {
    let db = TestDb::shared();
    let mut cmd = db.mariadb_cli(addr, ADMIN.user, ADMIN.password, Some(DB));
    cmd.args(["--table", "--force", "--show-warnings", "--default-character-set=utf8mb4"]).args(extra);
    cmd.stdin(File::open(script).unwrap()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = clients::wait_with_output(cmd.spawn().unwrap(), LIMIT).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    (mask_digits(&out.stdout, &["Connection id:", "TCP port:", "Uptime:", "Threads:"]), out.stderr)
}

/// COM_FIELD_LIST: the interactive CLI sends one for every table of the current database to
/// build its completion list; completing a column name shows the client understood the answers.
#[test]
fn cli_auto_rehash_field_lists_match_direct() {
    if !is_mariadb() {
        return;
    }
    let rehash_db = "rttscope_rehash";
    admin_sql(&format!(
        "CREATE DATABASE IF NOT EXISTS {rehash_db}; \
         CREATE OR REPLACE TABLE {rehash_db}.rh_wide (zz_unique_column INT DEFAULT 7, other_col VARCHAR(20) DEFAULT 'dflt', \
           third_col DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3), ü_col TEXT, {} ); \
         CREATE OR REPLACE TABLE {rehash_db}.rh_small (id INT PRIMARY KEY); \
         CREATE OR REPLACE VIEW {rehash_db}.rh_view AS SELECT zz_unique_column AS view_col FROM {rehash_db}.rh_wide",
        (0..200).map(|i| format!("c{i:03} INT")).collect::<Vec<_>>().join(", ")
    ));
    let cli = clients::mariadb_cli_binary().unwrap();
    let (direct, proxied) = direct_and_proxied(|addr| {
        // Ten matches, listed; then unique completions from each table and the view.
        let steps = [
            "SELECT rh_wide.c19\\t\\t",
            "SELECT rh_wide.th\\t",
            "SELECT rh_view.v\\t",
            "SELECT zz_u\\t FROM rh_wide;\\n",
        ];
        let mut args: Vec<String> = steps.iter().flat_map(|s| ["--step", s]).map(String::from).collect();
        args.extend(["--".into(), cli.to_string_lossy().into_owned()]);
        args.extend(["--no-defaults", "--protocol=TCP", "--skip-ssl", "--auto-rehash"].map(String::from));
        args.extend([
            format!("--host={}", addr.ip()),
            format!("--port={}", addr.port()),
            format!("--user={}", ADMIN.user),
            format!("--password={}", ADMIN.password),
            rehash_db.to_string(),
        ]);
        let transcript = clients::run_python("pty_session.py", &args).unwrap_or_else(|e| panic!("{e:#}"));
        mask_digits(&transcript, &["connection id is", " sec)"])
    });
    assert_same("interactive mariadb CLI", &direct, &proxied);
    for expected in [
        "rh_wide.c190",
        "rh_wide.c199",
        "rh_wide.third_col",
        "rh_view.view_col",
        "SELECT zz_unique_column  FROM rh_wide;",
        "exit code 0",
    ] {
        assert!(direct.contains(expected), "{expected:?} missing:\n{direct}");
    }
}

/// mariadb-admin: COM_PING, COM_STATISTICS, COM_REFRESH, COM_DEBUG, and SHOW/FLUSH queries.
#[test]
fn mariadb_admin_matches_direct() {
    let admin = |addr: SocketAddr, args: &[&str]| {
        let mut cmd = clients::mariadb_admin(addr, ADMIN).unwrap();
        cmd.args(args);
        clients::run(cmd, LIMIT).unwrap()
    };
    // Output that is the same from any connection: exact, exit codes included.
    for args in [
        &["ping"][..],
        &["refresh"],
        &["flush-status"],
        &["reload"],
        &["debug"],
        &["flush-tables", "flush-hosts"],
        &["kill", "999999999"],
    ] {
        let (direct, proxied) = direct_and_proxied(|addr| {
            let out = admin(addr, args);
            format!("exit {:?}\n{}\n--- stderr\n{}", out.status.code(), out.stdout, out.stderr)
        });
        assert_same(&format!("mariadb-admin {args:?}"), &direct, &proxied);
    }
    // Counters and uptime move between two runs: the same shape, with the numbers masked.
    let (direct, proxied) = direct_and_proxied(|addr| {
        let status = admin(addr, &["status"]);
        assert!(status.status.success() && status.stdout.starts_with("Uptime: "), "{status:?}");
        let version = admin(addr, &["version"]);
        assert!(version.status.success(), "{version:?}");
        let masked = mask_digits(&(status.stdout + &version.stdout), &["Uptime", "Threads", "Connection", "TCP port"]);
        // Other connections come and go: the header and our own row, and the status names.
        let processlist = admin(addr, &["processlist"]).stdout;
        assert!(processlist.contains("| show processlist "), "{processlist}");
        let header: Vec<String> =
            processlist.lines().nth(1).unwrap_or_default().split('|').map(|c| c.trim().to_string()).collect();
        let extended = admin(addr, &["extended-status"]).stdout;
        let names: Vec<String> =
            extended.lines().filter_map(|l| l.split('|').nth(1)).map(|c| c.trim().to_string()).collect();
        (masked, header, names)
    });
    assert_eq!(direct, proxied);
    // SHOW GLOBAL VARIABLES: exact but for the binlog position, which every write moves.
    let (direct, proxied) = direct_and_proxied(|addr| {
        let out = admin(addr, &["variables"]);
        assert!(out.status.success());
        out.stdout.lines().filter(|l| !l.contains("| gtid_")).collect::<Vec<_>>().join("\n")
    });
    assert_same("mariadb-admin variables", &direct, &proxied);
}

fn binlog_enabled() -> bool {
    let on = admin_sql("SELECT @@log_bin").trim() == "1";
    if !on {
        skip("the server has no binary log (start it with --log-bin)");
    }
    on
}

fn current_binlog() -> String {
    admin_sql("SHOW MASTER STATUS").split('\t').next().unwrap().to_string()
}

/// COM_BINLOG_DUMP of logs that are closed (so both runs read the very same bytes), with row
/// events of every size, one of them over 16 MiB and so split across packets.
#[test]
fn binlog_dump_matches_direct() {
    if !is_mariadb() || !binlog_enabled() {
        return;
    }
    let first = current_binlog();
    admin_sql(
        "CREATE OR REPLACE TABLE binlog_t (id INT PRIMARY KEY, v VARCHAR(100), b LONGBLOB); \
         INSERT INTO binlog_t SELECT seq, CONCAT('row ', seq, ' ü😀'), NULL FROM seq_1_to_3000; \
         UPDATE binlog_t SET v = CONCAT(v, '!') WHERE id % 3 = 0; DELETE FROM binlog_t WHERE id % 5 = 0; \
         INSERT INTO binlog_t VALUES (100000, 'big', REPEAT('b', 17 * 1024 * 1024)); \
         INSERT INTO binlog_t VALUES (100001, 'binlog-marker', NULL); FLUSH BINARY LOGS",
    );
    let last = current_binlog();
    let logs: Vec<String> = admin_sql("SHOW BINARY LOGS")
        .lines()
        .filter_map(|l| l.split('\t').next())
        .filter(|name| **name >= *first && **name < *last)
        .map(String::from)
        .collect();
    let (direct, proxied) = direct_and_proxied(|addr| {
        let mut cmd = clients::mariadb_binlog(addr, ADMIN).unwrap();
        cmd.arg("--verbose").args(&logs);
        run_checked(cmd)
    });
    assert_same("mariadb-binlog stderr", &direct.stderr, &proxied.stderr);
    assert_same("mariadb-binlog stdout", &direct.stdout, &proxied.stdout);
    assert!(direct.stdout.contains("binlog-marker"), "our events are not in {logs:?}");
}

/// A blocking COM_BINLOG_DUMP (`--stop-never`): events written after the dump started reach
/// both readers, in order, as they happen.
#[test]
fn binlog_live_stream_matches_direct() {
    if !is_mariadb() || !binlog_enabled() {
        return;
    }
    admin_sql("CREATE OR REPLACE TABLE binlog_live (id INT AUTO_INCREMENT PRIMARY KEY, v LONGTEXT); FLUSH BINARY LOGS");
    let log = current_binlog();
    let dir = tempfile::tempdir().unwrap();
    let proxy = TestProxy::start();
    // Distinct replica ids: the server drops an older dump that registers the same one.
    let readers: Vec<_> = [(TestDb::shared().upstream_addr(), "4201"), (proxy.addr(), "4202")]
        .into_iter()
        .map(|(addr, id)| {
            let path = dir.path().join(format!("{id}.out"));
            let mut cmd = clients::mariadb_binlog(addr, ADMIN).unwrap();
            cmd.args(["--verbose", "--stop-never", &format!("--stop-never-slave-server-id={id}"), &log]);
            let child =
                cmd.stdin(Stdio::null()).stdout(File::create(&path).unwrap()).stderr(Stdio::null()).spawn().unwrap();
            (child, path)
        })
        .collect();
    let read = |path: &std::path::Path| std::fs::read_to_string(path).unwrap_or_default();
    let wait_for = |readers: &[(std::process::Child, std::path::PathBuf)], needle: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !readers.iter().all(|(_, path)| read(path).contains(needle)) {
            assert!(Instant::now() < deadline, "{needle:?} did not reach both readers");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for(&readers, "Start: binlog");
    for i in 0..20 {
        admin_sql(&format!("INSERT INTO binlog_live (v) VALUES (REPEAT('live-{i} ', {}))", 1 << i));
    }
    admin_sql("INSERT INTO binlog_live (v) VALUES ('live-marker')");
    wait_for(&readers, "live-marker");
    let outputs: Vec<String> = readers
        .into_iter()
        .map(|(mut child, path)| {
            let _ = child.kill();
            let _ = child.wait();
            let text = read(&path);
            // Cut after the marker: what follows depends on when each reader was stopped.
            let end = text.find("live-marker").unwrap();
            text[..end].to_string()
        })
        .collect();
    assert_eq!(proxy.stats().protocol_errors.load(Ordering::Relaxed), 0);
    assert_same("mariadb-binlog --stop-never", &outputs[0], &outputs[1]);
    assert!(outputs[0].contains("live-19"), "{}", outputs[0]);
}
