//! Limits, timeouts and shutdown: what the relay does over a connection's life and the
//! process's, seen through real clients and the real binary.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use rttscope_config::HumanDuration;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::process::{ProxyProcess, free_listen_and_admin, rttscope_binary};
use rttscope_integration_tests::proxy::{TestProxy, test_config};
use tokio::sync::{RwLock, RwLockReadGuard};

/// The streaming test saturates both cores; tests with time bounds wait for it to finish.
/// (tokio's lock: each test has its own runtime, and the guard is held across awaits.)
static CPU: RwLock<()> = RwLock::const_new(());

async fn timing_sensitive() -> RwLockReadGuard<'static, ()> {
    CPU.read().await
}

const NO_HANG: Duration = Duration::from_secs(20);

fn opts(addr: SocketAddr) -> OptsBuilder {
    TestDb::shared().opts_via(addr, NATIVE.user, NATIVE.password)
}

async fn connect(addr: SocketAddr) -> mysql_async::Result<Conn> {
    tokio::time::timeout(NO_HANG, Conn::new(opts(addr))).await.expect("connecting must not hang")
}

async fn echo(conn: &mut Conn, n: u64) -> mysql_async::Result<()> {
    let got: Option<u64> = tokio::time::timeout(NO_HANG, conn.exec_first("SELECT ?", (n,))).await.expect("no hang")?;
    assert_eq!(got, Some(n));
    Ok(())
}

fn proxy_process() -> ProxyProcess {
    ProxyProcess::start(&format!("upstream: {}\n", TestDb::shared().upstream_addr())).unwrap()
}

async fn wait_exit(proxy: &mut ProxyProcess, within: Duration) -> std::process::ExitStatus {
    let status = tokio::task::block_in_place(|| proxy.wait_timeout(within)).unwrap();
    status.unwrap_or_else(|| panic!("rttscope still running {within:?} after the signal:\n{}", proxy.log()))
}

/// Whether rttscope's log has a line holding `text`, waiting up to 10 s for it: the test reads
/// rttscope's stderr through a thread of its own, which may not yet have read a line the
/// process wrote just before what the test saw (its listener answering, its exit).
fn logged(proxy: &ProxyProcess, text: &str) -> bool {
    tokio::task::block_in_place(|| proxy.log_line(|l| l.contains(text), Duration::from_secs(10))).is_some()
}

// --- Scheduling ------------------------------------------------------------------------

/// Each thread of process `pid`: its name and scheduling policy (`/proc/PID/task/TID/stat`,
/// field 41: 0 the normal policy, 3 `SCHED_BATCH`, 5 `SCHED_IDLE`).
fn thread_policies(pid: u32) -> Vec<(String, u32)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?;
            // The name is in parentheses and may hold anything: fields count from after it,
            // the first there being field 3.
            let (head, rest) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_owned();
            let policy = rest.split_whitespace().nth(41 - 3)?.parse().ok()?;
            Some((name, policy))
        })
        .collect()
}

/// `relay.sched_batch`, on by default: the connection threads, and only they, run under
/// `SCHED_BATCH` — but not while a link is emulated (`inject`), whose timers must not wait
/// for a busy CPU; `false` leaves them under the normal policy; and a policy rttscope was
/// started under (`chrt --idle 0`) is kept, not replaced. Checked once every connection
/// thread has served a client: a thread sets its policy before it serves.
#[tokio::test(flavor = "multi_thread")]
async fn connection_threads_run_under_sched_batch_unless_told_or_started_otherwise() {
    const NORMAL: u32 = 0;
    const BATCH: u32 = 3;
    const IDLE: u32 = 5;
    let upstream = format!("upstream: {}\n", TestDb::shared().upstream_addr());
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let cases = [
        ("default", ProxyProcess::start(&upstream), BATCH, NORMAL),
        ("default, a link emulated", ProxyProcess::start(&format!("{upstream}inject:\n  rtt: 1ms\n")), NORMAL, NORMAL),
        (
            "sched_batch: false",
            ProxyProcess::start(&format!("{upstream}relay:\n  sched_batch: false\n")),
            NORMAL,
            NORMAL,
        ),
        ("under chrt --idle 0", ProxyProcess::start_behind(&["chrt", "--idle", "0"], &upstream), IDLE, IDLE),
    ];
    for (case, proxy, connection_threads, the_rest) in cases {
        let proxy = proxy.unwrap_or_else(|e| panic!("{case}: {e:#}"));
        // Connections are dealt to the threads in turn: one client each.
        let mut clients = Vec::new();
        for n in 0..threads {
            let mut conn = connect(proxy.listen()).await.unwrap();
            echo(&mut conn, n as u64).await.unwrap();
            clients.push(conn);
        }
        let policies = thread_policies(proxy.pid());
        let (served, others): (Vec<_>, Vec<_>) =
            policies.iter().partition(|(name, _)| name.starts_with("rttscope-conn-"));
        assert_eq!(served.len(), threads, "{case}: one connection thread per CPU: {policies:?}");
        assert!(served.iter().all(|(_, p)| *p == connection_threads), "{case}: {policies:?}\n{}", proxy.log());
        assert!(others.iter().all(|(_, p)| *p == the_rest), "{case}: {policies:?}");
        for conn in clients {
            conn.disconnect().await.unwrap();
        }
    }
}

// --- Shutdown --------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_in_flight_commands_then_exits_0() {
    let _cpu = timing_sensitive().await;
    let mut proxy = proxy_process();
    let mut idle = connect(proxy.listen()).await.unwrap();
    let mut busy = connect(proxy.listen()).await.unwrap();
    let sleeping = tokio::spawn(async move {
        let value: Option<i64> = busy.query_first("SELECT SLEEP(2)").await?;
        mysql_async::Result::Ok(value)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.signal(libc::SIGTERM).unwrap();
    let signalled = Instant::now();

    // The listener goes at once; the busy client is still being served.
    let refused = loop {
        match TcpStream::connect(proxy.listen()) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => break true,
            _ if signalled.elapsed() > Duration::from_secs(1) => break false,
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    assert!(refused, "new connections still accepted after SIGTERM");
    assert!(!sleeping.is_finished(), "SLEEP(2) ended early");

    assert_eq!(sleeping.await.unwrap().expect("the in-flight query completes"), Some(0));
    assert!(echo(&mut idle, 1).await.is_err(), "the idle connection was left open");
    let status = wait_exit(&mut proxy, Duration::from_secs(4)).await;
    assert!(status.success(), "{status}:\n{}", proxy.log());
    assert!(signalled.elapsed() < Duration::from_secs(4));
    let log = proxy.log();
    assert!(log.contains("SIGTERM: shutting down") && log.contains("rttscope stopped"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_when_idle_exits_0() {
    let _cpu = timing_sensitive().await;
    let mut proxy = proxy_process();
    let mut conn = connect(proxy.listen()).await.unwrap();
    echo(&mut conn, 1).await.unwrap();
    proxy.signal(libc::SIGINT).unwrap();
    let status = wait_exit(&mut proxy, Duration::from_secs(3)).await;
    assert!(status.success(), "{status}:\n{}", proxy.log());
    assert!(logged(&proxy, "SIGINT: shutting down"), "{}", proxy.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn grace_period_bounds_shutdown() {
    let _cpu = timing_sensitive().await;
    let db = TestDb::shared();
    let yaml = format!("upstream: {}\nlimits:\n  shutdown_grace: 1s\n", db.upstream_addr());
    let mut proxy = ProxyProcess::start(&yaml).unwrap();
    let mut busy = connect(proxy.listen()).await.unwrap();
    let sleeping = tokio::spawn(async move { busy.query_drop("SELECT SLEEP(10)").await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.signal(libc::SIGTERM).unwrap();
    let status = wait_exit(&mut proxy, Duration::from_secs(3)).await;
    assert!(status.success(), "{status}:\n{}", proxy.log());
    let result = tokio::time::timeout(Duration::from_secs(5), sleeping).await.expect("client told at once").unwrap();
    assert!(result.is_err(), "SLEEP(10) completed although its connection was aborted");
    assert!(logged(&proxy, "grace period over"), "{}", proxy.log());
}

/// A second signal stops at once, cutting off what is in flight, and still writes the final
/// report with what was recorded: the recording is not lost with the drain.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_signal_stops_at_once_and_keeps_the_report() {
    let _cpu = timing_sensitive().await;
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let db = TestDb::shared();
    let yaml = format!("upstream: {}\nreport:\n  path: {}\n", db.upstream_addr(), report.display());
    let mut proxy = ProxyProcess::start(&yaml).unwrap();
    let mut conn = connect(proxy.listen()).await.unwrap();
    conn.query_drop("SELECT 'before the signals'").await.unwrap();
    let mut busy = connect(proxy.listen()).await.unwrap();
    let _sleeping = tokio::spawn(async move { busy.query_drop("SELECT SLEEP(10)").await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.signal(libc::SIGTERM).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.signal(libc::SIGTERM).unwrap();
    let status = wait_exit(&mut proxy, Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(1), "{status}:\n{}", proxy.log());
    let written = std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("no report ({e}):\n{}", proxy.log()));
    assert!(written.contains("\"schema_version\""), "{written}");
    assert!(written.contains("select ?"), "the statement before the signals is in it: {written}");
    assert!(logged(&proxy, "final report written with what was recorded so far"), "{}", proxy.log());
}

// --- Limits ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn max_connections_refuses_with_1040() {
    let mut config = test_config();
    config.limits.max_connections = 2;
    let proxy = TestProxy::with_config(config);
    let mut first = connect(proxy.addr()).await.unwrap();
    let second = connect(proxy.addr()).await.unwrap();
    match connect(proxy.addr()).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1040, "{e:?}");
            assert!(e.message.contains("max_connections"), "{e:?}");
        }
        other => panic!("a third connection over the limit of 2: {other:?}"),
    }
    let out = cli(TestDb::shared().mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, None)).await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("ERROR 1040"), "{out:?}");
    assert_eq!(proxy.stats().connections_rejected.load(Ordering::Relaxed), 2);
    echo(&mut first, 1).await.unwrap();

    second.disconnect().await.unwrap();
    // The slot frees when rttscope has seen the close, a moment after the client's.
    let deadline = Instant::now() + Duration::from_secs(10);
    while proxy.stats().connections_active.load(Ordering::Relaxed) > 1 {
        assert!(Instant::now() < deadline, "the closed connection still holds its slot");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut third = connect(proxy.addr()).await.expect("a free slot after one closed");
    echo(&mut third, 2).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_timeout_closes_only_idle_connections() {
    let _cpu = timing_sensitive().await;
    let mut config = test_config();
    config.limits.idle_timeout = HumanDuration::from_secs(1);
    let proxy = TestProxy::with_config(config);
    let mut idle = connect(proxy.addr()).await.unwrap();
    let mut chatty = connect(proxy.addr()).await.unwrap();
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(3) {
        n += 1;
        echo(&mut chatty, n).await.expect("a connection used every 300 ms stays up");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // `idle` has now been quiet for over 3 s (2.5 s asked; the chatty loop gives margin).
    assert!(echo(&mut idle, 0).await.is_err(), "an idle connection outlived idle_timeout");
    echo(&mut chatty, 1000).await.unwrap();
    assert_eq!(proxy.stats().connections_active.load(Ordering::Relaxed), 1);
}

/// A query running longer than `idle_timeout` is not idle: it completes, and the
/// connection stays usable.
#[tokio::test(flavor = "multi_thread")]
async fn idle_timeout_spares_a_running_query() {
    let _cpu = timing_sensitive().await;
    let mut config = test_config();
    config.limits.idle_timeout = HumanDuration::from_secs(1);
    let proxy = TestProxy::with_config(config);
    let mut conn = connect(proxy.addr()).await.unwrap();
    let slept: Option<u8> =
        tokio::time::timeout(NO_HANG, conn.query_first("SELECT SLEEP(2.5)")).await.expect("no hang").unwrap();
    assert_eq!(slept, Some(0), "SLEEP(2.5) was cut short");
    echo(&mut conn, 7).await.expect("the connection outlives a query longer than idle_timeout");
}

/// A command with no response within `query_timeout` gets MySQL's statement-timeout
/// error in its place; its connection closes, the others carry on.
#[tokio::test(flavor = "multi_thread")]
async fn query_timeout_answers_with_1969() {
    let _cpu = timing_sensitive().await;
    let mut config = test_config();
    config.limits.query_timeout = HumanDuration::from_secs(1);
    let proxy = TestProxy::with_config(config);
    let mut stuck = connect(proxy.addr()).await.unwrap();
    let mut other = connect(proxy.addr()).await.unwrap();
    let started = Instant::now();
    let result: mysql_async::Result<Option<u8>> =
        tokio::time::timeout(NO_HANG, stuck.query_first("SELECT SLEEP(10)")).await.expect("no hang");
    let elapsed = started.elapsed();
    let Err(mysql_async::Error::Server(e)) = result else { panic!("expected ERR 1969, got {result:?}") };
    assert_eq!((e.code, e.state.as_str()), (1969, "70100"), "{e:?}");
    assert!(e.message.contains("query_timeout"), "{e:?}");
    assert!(elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4), "after {elapsed:?}");
    assert!(echo(&mut stuck, 1).await.is_err(), "the timed-out connection is closed");
    echo(&mut other, 2).await.expect("the other connection carries on");
    let slept: Option<u8> = other.query_first("SELECT SLEEP(0.5)").await.unwrap();
    assert_eq!(slept, Some(0), "a query within query_timeout completes");
}

/// Under a low open-file limit, the client that finds none left gets 1040 naming the fd
/// limit (never a 1429 blaming the upstream); the process carries on and serves again once
/// descriptors free up. rttscope also warns at start that the limit cannot hold
/// `max_connections`.
#[tokio::test(flavor = "multi_thread")]
async fn out_of_file_descriptors_refuses_with_1040_naming_the_limit() {
    const LIMIT: u64 = 64;
    let yaml = format!(
        "upstream: {}
",
        TestDb::shared().upstream_addr()
    );
    let proxy = ProxyProcess::start_with(rttscope_binary().unwrap(), &yaml, |cmd| {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit { rlim_cur: LIMIT, rlim_max: LIMIT };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
    .unwrap();
    assert!(logged(&proxy, "open-file limit cannot hold"), "no warning at start:\n{}", proxy.log());
    let mut open = Vec::new();
    let refusal = loop {
        assert!(open.len() < LIMIT as usize, "{} connections under a limit of {LIMIT} fds", open.len());
        match connect(proxy.listen()).await {
            Ok(conn) => open.push(conn),
            Err(mysql_async::Error::Server(e)) => break e,
            Err(other) => panic!("after {} connections: {other:?}\n{}", open.len(), proxy.log()),
        }
    };
    assert_eq!(refusal.code, 1040, "{refusal:?}");
    assert!(refusal.message.contains(&format!("fd limit {LIMIT}")), "{refusal:?}");
    assert!(open.len() >= 10, "only {} connections fit", open.len());
    for mut conn in open.drain(..5) {
        echo(&mut conn, 3).await.expect("connections open before the refusal still work");
        conn.disconnect().await.unwrap();
    }
    // Descriptors came back: new clients are served again.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut again = loop {
        match connect(proxy.listen()).await {
            Ok(conn) => break conn,
            Err(e) => assert!(Instant::now() < deadline, "no connection after others closed: {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    echo(&mut again, 4).await.unwrap();
    assert!(logged(&proxy, "out of file descriptors"), "{}", proxy.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn many_concurrent_connections() {
    let _cpu = timing_sensitive().await;
    let proxy = TestProxy::start();
    let addr = proxy.addr();
    let clients: Vec<_> = (0..200u64)
        .map(|c| {
            tokio::spawn(async move {
                let mut conn = connect(addr).await?;
                for q in 0..20 {
                    echo(&mut conn, c * 1000 + q).await?;
                }
                conn.disconnect().await
            })
        })
        .collect();
    for (c, client) in clients.into_iter().enumerate() {
        client.await.unwrap().unwrap_or_else(|e| panic!("client {c}: {e}"));
    }
    assert_eq!(proxy.stats().connections_accepted.load(Ordering::Relaxed), 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    while proxy.stats().connections_active.load(Ordering::Relaxed) != 0 {
        assert!(Instant::now() < deadline, "connections still counted active after every client left");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// --- The command line ------------------------------------------------------------------

async fn cli(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run a command")).await.unwrap()
}

fn check_config(path: &Path) -> Output {
    Command::new(rttscope_binary().unwrap()).arg("check-config").arg(path).output().unwrap()
}

#[test]
fn check_config_reports_the_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, yaml: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, yaml).unwrap();
        path
    };
    let good = check_config(&file("good.yaml", "listen: 127.0.0.1:7033\nlimits:\n  max_connections: 7\n"));
    let stdout = String::from_utf8_lossy(&good.stdout);
    assert!(good.status.success(), "{good:?}");
    // The effective config: the file's values and every default.
    for needle in ["127.0.0.1:7033", "max_connections: 7", "shutdown_grace", "upstream"] {
        assert!(stdout.contains(needle), "no {needle:?} in\n{stdout}");
    }
    // What it prints is a config file itself, and means the same.
    let effective = stdout.split_once('\n').map(|(_ok, yaml)| yaml).unwrap_or_default();
    let again = check_config(&file("effective.yaml", effective));
    assert!(again.status.success(), "{again:?}");
    assert_eq!(String::from_utf8_lossy(&again.stdout).split_once('\n').map(|(_, y)| y), Some(effective));

    let cases = [
        ("unknown.yaml", "listen: 127.0.0.1:7033\ninject:\n  rtts: 5ms\n", "unknown.yaml:3", "inject.rtts"),
        ("negative.yaml", "inject: {rtt: -5ms}\n", "negative.yaml:1", "negative"),
    ];
    for (name, yaml, place, needle) in cases {
        let out = check_config(&file(name, yaml));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {out:?}");
        for expected in [place, needle, "inject.rtt"] {
            assert!(stderr.contains(expected), "{name}: no {expected:?} in {stderr}");
        }
    }

    let missing = dir.path().join("missing.yaml");
    let out = check_config(&missing);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
}

/// An upstream name that does not resolve is warned of at start, not first found by a client.
#[test]
fn an_upstream_that_does_not_resolve_is_warned_of_at_start() {
    let proxy = ProxyProcess::start("upstream: nosuchhost.invalid:3306\n").unwrap();
    let warned = proxy.log_line(|l| l.contains("upstream.address does not resolve"), Duration::from_secs(15));
    assert!(warned.is_some_and(|l| l.contains("nosuchhost.invalid:3306")), "{}", proxy.log());
}

/// Start lists every problem of its file, as check-config does; check-config also names a bad
/// --set beside the file's problems and an `RTTSCOPE_*` variable that names no key.
#[test]
fn every_problem_is_listed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "limits:\n  idle_timeout: soon\n  max_conections: 5\ninject:\n  rtts: 5ms\n").unwrap();
    let out = Command::new(rttscope_binary().unwrap()).arg("-c").arg(&bad).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for said in ["bad.yaml:2: limits.idle_timeout", "bad.yaml:3: limits.max_conections", "bad.yaml:5: inject.rtts"] {
        assert!(stderr.contains(said), "no {said:?} in {stderr}");
    }
    let out = Command::new(rttscope_binary().unwrap())
        .arg("check-config")
        .arg(&bad)
        .args(["--set", "limits.idle_timeot=5m"])
        .env("RTTSCOPE_LIMITS_IDEL_TIMEOUT", "5m")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for said in ["limits.idle_timeot: unknown key", "RTTSCOPE_LIMITS_IDEL_TIMEOUT names no config key", "inject.rtts"] {
        assert!(stderr.contains(said), "no {said:?} in {stderr}");
    }
}

/// What start would refuse is found before it: check-config and start name a report path in
/// a directory that does not exist and TLS files that are not there; a report path that goes
/// away while rttscope runs makes the stop exit 1, not 0, since the recording was lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_report_path_or_tls_file_start_cannot_use_is_named_before_it_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir").join("report.json");
    let unwritable = dir.path().join("report.yaml");
    std::fs::write(&unwritable, format!("report:\n  path: {}\n", missing.display())).unwrap();
    let out = check_config(&unwritable);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr.contains("report.path: cannot write the final report to"), "{stderr}");
    assert!(stderr.contains("no-such-dir does not exist"), "{stderr}");

    let tls = dir.path().join("tls.yaml");
    std::fs::write(&tls, "listen:\n  tls:\n    cert: /nonexistent/cert.pem\n    key: /nonexistent/key.pem\n").unwrap();
    let out = check_config(&tls);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr.contains("listen.tls.cert: /nonexistent/cert.pem"), "{stderr}");

    // Start refuses the unwritable path at once, before it listens.
    let (listen, admin) = free_listen_and_admin();
    let mut cmd = Command::new(rttscope_binary().unwrap());
    cmd.args(["--config", &unwritable.display().to_string(), "--listen", &listen.to_string()]);
    cmd.args(["--admin", &admin.to_string(), "--upstream", &TestDb::shared().upstream_addr().to_string()]);
    let out = cli(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot start: report.path: cannot write the final report to"), "{stderr}");

    // A path that worked at start and is gone at stop: the stop is not a success.
    let reports = dir.path().join("reports");
    std::fs::create_dir(&reports).unwrap();
    let yaml = format!(
        "upstream: {}\nreport:\n  path: {}\n",
        TestDb::shared().upstream_addr(),
        reports.join("r.json").display()
    );
    let mut proxy = ProxyProcess::start(&yaml).unwrap();
    let mut conn = connect(proxy.listen()).await.unwrap();
    echo(&mut conn, 1).await.unwrap();
    drop(conn);
    std::fs::remove_dir(&reports).unwrap();
    proxy.signal(libc::SIGTERM).unwrap();
    let status = wait_exit(&mut proxy, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(1), "{status}:\n{}", proxy.log());
    assert!(logged(&proxy, "cannot write the final report"), "{}", proxy.log());
}

/// An address that refuses connections while the returned socket lives: bound, never
/// listening, so no other test can take the port meanwhile.
fn refusing_addr() -> (socket2::Socket, SocketAddr) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    (socket, addr)
}

/// Kills the child on drop, so a failed assertion leaves no process behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn listen_and_upstream_flags_beat_the_file() {
    let db = TestDb::shared();
    // The file's addresses are held, unlistened: connecting there fails unless rttscope
    // wrongly used them, and then it could not bind its listener either.
    let ((_held_listen, file_listen), (_held_upstream, nowhere)) = (refusing_addr(), refusing_addr());
    let (flag_listen, admin) = free_listen_and_admin();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rttscope.yaml");
    let yaml = format!("listen: {file_listen}\nadmin: {admin}\nupstream: {nowhere}\n");
    std::fs::write(&config, yaml).unwrap();
    let child = Command::new(rttscope_binary().unwrap())
        .arg("--config")
        .arg(&config)
        .args(["--listen", &flag_listen.to_string(), "--upstream", &db.upstream_addr().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaped(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(flag_listen).is_err() {
        if let Some(status) = child.0.try_wait().unwrap() {
            let mut log = String::new();
            child.0.stderr.take().map(|mut e| e.read_to_string(&mut log));
            panic!("rttscope exited ({status}): {log}");
        }
        assert!(Instant::now() < deadline, "rttscope never listened on --listen {flag_listen}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(TcpStream::connect(file_listen).is_err(), "also listening on the file's address");
    // Logging in proves the connection reached the real server, not the file's upstream.
    let mut conn = connect(flag_listen).await.expect("--upstream is the real server");
    let db_name: Option<String> = conn.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(db_name.as_deref(), Some(DB));
}

// --- Memory ----------------------------------------------------------------------------

/// Rows of 60,000 bytes; 17,000 of them make 1 GB. Override with RTTSCOPE_TEST_STREAM_ROWS.
fn stream_rows() -> u64 {
    std::env::var("RTTSCOPE_TEST_STREAM_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(17_000)
}

/// Runs the streaming query with the CLI through `addr`; returns the bytes it printed.
fn stream_through(addr: SocketAddr, rows: u64) -> u64 {
    let sql = format!("SELECT REPEAT('x', 60000) FROM seq_1_to_{rows}");
    let mut child = TestDb::shared()
        .mariadb_cli(addr, NATIVE.user, NATIVE.password, Some(DB))
        .args(["--quick", "-N", "-e", &sql])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("reading the CLI's output: {e}"),
        }
    }
    assert!(child.wait().unwrap().success(), "the streaming query failed");
    total
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gigabyte_streams_in_constant_memory() {
    let _cpu = CPU.write().await;
    let rows = stream_rows();
    let db = TestDb::shared();
    let proxy = proxy_process();
    // Warm up: the first connection brings the blocking pool's resolver thread and friends.
    let mut conn = connect(proxy.listen()).await.unwrap();
    echo(&mut conn, 1).await.unwrap();
    conn.disconnect().await.unwrap();
    let (baseline, _) = proxy.memory_kib().unwrap();

    let listen = proxy.listen();
    let started = Instant::now();
    let streaming = tokio::task::spawn_blocking(move || stream_through(listen, rows));
    let mut peak = baseline;
    while !streaming.is_finished() {
        peak = peak.max(proxy.memory_kib().unwrap().0);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let through_proxy = streaming.await.unwrap();
    let (_, hwm) = proxy.memory_kib().unwrap();
    eprintln!(
        "streamed {through_proxy} bytes through rttscope in {:?}; RSS baseline {baseline} KiB, sampled peak {peak} KiB, VmHWM {hwm} KiB",
        started.elapsed()
    );
    let direct = tokio::task::spawn_blocking(move || stream_through(db.upstream_addr(), rows)).await.unwrap();

    assert_eq!(through_proxy, direct, "bytes through rttscope differ from a direct run");
    assert!(direct >= rows * 60_000, "only {direct} bytes for {rows} rows");
    // VmHWM also catches a spike between two samples.
    let growth = peak.max(hwm).saturating_sub(baseline);
    assert!(growth < 2048, "RSS grew by {growth} KiB (baseline {baseline} KiB) streaming {direct} bytes");
}

/// Memory rttscope frees goes back to the system every `limits.heap_trim`. Connections that
/// close between ones still open leave their relay buffers as holes in the heap, which glibc's
/// allocator keeps (resident, so RSS does not fall); the trim releases their pages.
#[tokio::test(flavor = "multi_thread")]
async fn freed_memory_is_handed_back_to_the_system() {
    const CONNECTIONS: u64 = 100;
    let _cpu = CPU.write().await;
    // 96 KiB buffers stay below glibc's mmap threshold: they come from the heap's arenas.
    let yaml = format!(
        "upstream: {}\nlimits:\n  heap_trim: 1s\nrelay:\n  buffer_size: 96KiB\n",
        TestDb::shared().upstream_addr()
    );
    let proxy = ProxyProcess::start(&yaml).unwrap();
    let mut conns = Vec::new();
    for n in 0..CONNECTIONS {
        let mut conn = connect(proxy.listen()).await.unwrap();
        echo(&mut conn, n).await.unwrap();
        conns.push(conn);
    }
    let (all_open, _) = proxy.memory_kib().unwrap();
    // Every other one closes, the last stays: 50 × 2 × 96 KiB of holes between live buffers.
    let mut kept = Vec::new();
    for (n, conn) in conns.into_iter().enumerate() {
        if n % 2 == 0 { conn.disconnect().await.unwrap() } else { kept.push(conn) }
    }
    let holes_kib = CONNECTIONS / 2 * 2 * 96;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut rss = all_open;
    while rss + holes_kib / 2 > all_open {
        assert!(
            Instant::now() < deadline,
            "RSS {rss} KiB 5 s after {} connections closed, {all_open} KiB with all open: their {holes_kib} KiB \
             of buffers were not handed back",
            CONNECTIONS / 2
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        rss = proxy.memory_kib().unwrap().0;
    }
    for mut conn in kept {
        echo(&mut conn, 1).await.unwrap();
        conn.disconnect().await.unwrap();
    }
}

/// Every key can come from the environment (`RTTSCOPE_*`) and from `--set`, over the file:
/// flag > environment > file. Here the file names a server that refuses, the environment the
/// real one and a limit of 5 connections, a flag a limit of 2.
#[tokio::test(flavor = "multi_thread")]
async fn settings_from_the_environment_and_flags_win_over_the_file() {
    let (_refusing, nowhere) = refusing_addr();
    let db = TestDb::shared().upstream_addr();
    let yaml = format!("upstream: {nowhere}\n");
    let proxy = ProxyProcess::start_with(rttscope_binary().unwrap(), &yaml, |cmd| {
        cmd.env("RTTSCOPE_UPSTREAM_ADDRESS", db.to_string())
            .env("RTTSCOPE_LIMITS_MAX_CONNECTIONS", "5")
            .arg("--set")
            .arg("limits.max_connections=2");
    })
    .unwrap();
    // The readiness probe's connection may hold a slot a moment longer.
    let mut held = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while held.len() < 2 {
        match connect(proxy.listen()).await {
            Ok(mut conn) => {
                echo(&mut conn, 7).await.expect("the environment's upstream, not the file's");
                held.push(conn);
            }
            Err(mysql_async::Error::Server(e)) if e.code == 1040 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the environment's upstream, not the file's: {e:?}"),
        }
    }
    match connect(proxy.listen()).await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1040, "{e:?}"),
        other => panic!("the flag's limit of 2 connections, not the environment's 5: {other:?}"),
    }

    // check-config shows the effective config, environment and flags included, and lists
    // every problem of a bad file at once.
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "limits:\n  max_connections: 7\n").unwrap();
    let out = Command::new(rttscope_binary().unwrap())
        .args(["check-config", &good.display().to_string(), "--set", "limits.idle_timeout=90s"])
        .env("RTTSCOPE_INJECT_RTT", "15ms")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    for needle in ["max_connections: 7", "idle_timeout: 90s", "\n  rtt: 15ms"] {
        assert!(stdout.contains(needle), "no {needle:?} in\n{stdout}");
    }
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "listne: 1\nlimits:\n  idle_timeout: soon\ninject:\n  rtts: 5ms\n").unwrap();
    let out = check_config(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    for needle in ["bad.yaml:1: listne", "bad.yaml:3: limits.idle_timeout", "bad.yaml:5: inject.rtts"] {
        assert!(stderr.contains(needle), "no {needle:?} in\n{stderr}");
    }
}

/// A warning about the whole configuration is logged once at start, not per connection.
#[tokio::test(flavor = "multi_thread")]
async fn fixed_buffer_warning_is_logged_once_not_per_connection() {
    let db = TestDb::shared().upstream_addr();
    let yaml = format!("upstream: {db}\nrelay:\n  upstream_sndbuf: 64KiB\n");
    let proxy = ProxyProcess::start(&yaml).unwrap();
    for n in 0..3 {
        let mut conn = connect(proxy.listen()).await.unwrap();
        echo(&mut conn, n).await.unwrap();
        conn.disconnect().await.unwrap();
    }
    let log = proxy.log();
    assert_eq!(log.matches("relay.upstream_sndbuf is set").count(), 1, "{log}");
}
