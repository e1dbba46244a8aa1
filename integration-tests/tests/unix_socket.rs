//! The application-side leg over a Unix socket (`listen: unix:/path`): the mariadb CLI's
//! `--socket`, PyMySQL's `unix_socket=` and mysql_async's socket option all work through it,
//! beside a TCP listener; the file gets the configured mode, a stale file is replaced, a
//! live socket or a file that is not a socket is left alone, and the file goes at stop.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use rttscope_integration_tests::clients::python;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TLS_NATIVE, TestDb, TlsDb};
use rttscope_integration_tests::process::{
    ListeningChild, ProxyProcess, free_listen_and_admin, free_port, rttscope_binary,
};

fn upstream() -> String {
    format!("upstream: {}\n", TestDb::shared().upstream_addr())
}

/// A whole config listening on TCP and on `socket`, for a start expected to fail.
fn yaml(socket: &Path) -> String {
    format!("{}listen:\n  address: [\"127.0.0.1:{}\", \"unix:{}\"]\n", upstream(), free_port(), socket.display())
}

/// `mariadb --socket` through rttscope's socket, as `user`, running `sql`.
fn cli_command(socket: &Path, (user, password): (&str, &str), sql: &str) -> Command {
    let mut cmd = Command::new(rttscope_integration_tests::clients::mariadb_cli_binary().expect("a mariadb CLI"));
    cmd.args(["--no-defaults", "--protocol=SOCKET", "--batch", "-N"])
        .arg(format!("--socket={}", socket.display()))
        .args([format!("--user={user}"), format!("--password={password}"), format!("--database={DB}")])
        .args(["-e", sql]);
    cmd
}

/// [`cli_command`] as `rtt_native`, run to the end.
fn cli_via_socket(socket: &Path, sql: &str) -> std::process::Output {
    cli_command(socket, (NATIVE.user, NATIVE.password), sql).output().expect("run the mariadb CLI")
}

fn socket_path(dir: &Path) -> PathBuf {
    dir.join("mysql.sock")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_connect_through_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_path(dir.path());
    let proxy = ProxyProcess::start_with_unix(&socket, None, &upstream()).unwrap();
    let meta = std::fs::metadata(&socket).expect("the socket file exists");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660, "the default mode");

    // The CLI, by --socket.
    let out = cli_via_socket(&socket, "SELECT CONCAT('via ', 'socket'), CURRENT_USER()");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("via socket\trtt_native@"), "{stdout}");

    // PyMySQL, by unix_socket=.
    let script = format!(
        "import pymysql\n\
         c = pymysql.connect(unix_socket={:?}, user={:?}, password={:?}, database={:?})\n\
         cur = c.cursor(); cur.execute('SELECT 40 + %s', (2,)); print(cur.fetchone()[0]); c.close()",
        socket.display().to_string(),
        NATIVE.user,
        NATIVE.password,
        DB
    );
    let out = Command::new(python().unwrap()).args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");

    // mysql_async, by its socket option (prefer_socket over the TCP address it also has).
    let opts = TestDb::shared()
        .opts_via(proxy.listen(), NATIVE.user, NATIVE.password)
        .socket(Some(socket.display().to_string()))
        .prefer_socket(true);
    let mut conn = mysql_async::Conn::new(opts).await.expect("mysql_async over the socket");
    let n: Option<u32> = conn.exec_first("SELECT ?", (7u32,)).await.unwrap();
    assert_eq!(n, Some(7));
    // rttscope names the connection by its socket: it really came that way.
    let conns = rttscope::cli::admin_client::get(&format!("http://{}", proxy.admin()), "/connections").unwrap();
    assert!(conns.contains(&format!("unix:{}", socket.display())), "{conns}");
    conn.disconnect().await.unwrap();

    // TCP works beside it.
    let mut tcp = mysql_async::Conn::new(TestDb::shared().opts_via(proxy.listen(), NATIVE.user, NATIVE.password))
        .await
        .expect("TCP beside the socket");
    tcp.query_drop("DO 1").await.unwrap();
    drop(tcp);

    // The file goes when rttscope stops.
    let mut proxy = proxy;
    proxy.signal(libc::SIGTERM).unwrap();
    let status = tokio::task::block_in_place(|| proxy.wait_timeout(Duration::from_secs(15))).unwrap();
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{}", proxy.log());
    assert!(!socket.exists(), "the socket file outlived rttscope");
}

/// `--listen`, repeated, takes a socket and a TCP address without a config file: what a
/// sidecar's command line says.
#[test]
fn the_listen_flag_takes_a_socket_and_an_address() {
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_path(dir.path());
    let (listen, admin) = free_listen_and_admin();
    let mut cmd = Command::new(rttscope_binary().unwrap());
    cmd.arg("--listen").arg(format!("unix:{}", socket.display()));
    cmd.args(["--listen", &listen.to_string(), "--admin", &admin.to_string()]);
    cmd.args(["--upstream", &TestDb::shared().upstream_addr().to_string()]).env("NO_COLOR", "1");
    let _proxy = ListeningChild::spawn(cmd, listen, &|| std::net::TcpStream::connect(listen).is_ok()).unwrap();
    let out = cli_via_socket(&socket, "SELECT 'by the flag'");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "by the flag");
}

#[test]
fn socket_mode_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_path(dir.path());
    let _proxy = ProxyProcess::start_with_unix(&socket, Some("0600"), &upstream()).unwrap();
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn a_stale_socket_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_path(dir.path());
    // A socket file nobody listens on: what a killed process leaves behind.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let proxy = ProxyProcess::start_with_unix(&socket, None, &upstream()).unwrap();
    let out = cli_via_socket(&socket, "SELECT 1");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(proxy.log().contains("stale socket file"), "{}", proxy.log());
}

/// Starts rttscope expecting it to refuse; returns what it logged.
fn refused_start(yaml: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rttscope.yaml");
    std::fs::write(&config, format!("admin: 127.0.0.1:{}\n{yaml}", free_port())).unwrap();
    let mut child = Command::new(rttscope_binary().unwrap())
        .arg("--config")
        .arg(&config)
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success(), "rttscope started");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rttscope kept running over a live socket");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    log
}

#[test]
fn a_live_socket_or_another_file_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_path(dir.path());
    let live = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let log = refused_start(&yaml(&socket));
    assert!(log.contains("in use"), "{log}");
    assert!(socket.exists(), "the live socket was removed");
    drop(live);

    let nowhere = dir.path().join("no-such-dir").join("mysql.sock");
    let log = refused_start(&yaml(&nowhere));
    assert!(
        log.contains(&format!("the directory {} does not exist", dir.path().join("no-such-dir").display())),
        "{log}"
    );

    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    let log = refused_start(&yaml(&file));
    assert!(log.contains("not a socket"), "{log}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

/// Statements of `lock` waiting for it, as the server's process list shows them.
async fn waiting_for(conn: &mut mysql_async::Conn, lock: &str) -> u64 {
    let sql = format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO LIKE '%{lock}%' \
         AND ID <> CONNECTION_ID()"
    );
    conn.query_first(sql).await.expect("the process list").expect("a count")
}

/// A client gone in the middle of a command (killed: its socket closed, no `COM_QUIT`)
/// frees the server's thread through rttscope as it does directly: the server, waiting on a
/// lock for it, notices that it left — here with TLS on the long hop, where passing the
/// client's FIN on as a half-close carried a `close_notify` the busy server found waiting to
/// be read and took for a client still there (MariaDB's main.dirty_close). Over the socket
/// rttscope can tell a client gone from one that only half-closed; over TCP it cannot
/// (docs/production.md, "What the client sees when something fails").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_command_frees_the_servers_thread() {
    let db = TlsDb::shared();
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_path(dir.path());
    let proxy = ProxyProcess::start_with_unix(&socket, None, &format!("upstream: {}\n", db.upstream_addr())).unwrap();
    let lock = "rttscope_client_gone";
    let holder_opts = db
        .opts_via(proxy.listen(), TLS_NATIVE.user, TLS_NATIVE.password)
        .socket(Some(socket.display().to_string()))
        .prefer_socket(true);
    let mut holder = mysql_async::Conn::new(holder_opts).await.expect("a login over the socket");
    let got: Option<u32> = holder.query_first(format!("SELECT GET_LOCK('{lock}', 0)")).await.unwrap();
    assert_eq!(got, Some(1));
    let mut waiter =
        cli_command(&socket, (TLS_NATIVE.user, TLS_NATIVE.password), &format!("SELECT GET_LOCK('{lock}', 3600)"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn mariadb");
    let deadline = Instant::now() + Duration::from_secs(20);
    while waiting_for(&mut holder, lock).await == 0 {
        assert!(Instant::now() < deadline, "the client's GET_LOCK never waited:\n{}", proxy.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    waiter.kill().expect("kill the client");
    let _ = waiter.wait();
    let gone = Instant::now();
    while waiting_for(&mut holder, lock).await > 0 {
        assert!(
            gone.elapsed() < Duration::from_secs(10),
            "the server still runs the gone client's GET_LOCK:\n{}",
            proxy.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("the server ended the gone client's command after {:?}", gone.elapsed());
    holder.disconnect().await.unwrap();
}
