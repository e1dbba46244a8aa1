//! Real client programs for compatibility tests: the Python venv and its scripts, and the
//! `mariadb-admin` / `mariadb-binlog` tools, each run against an address with a time limit; and
//! the comparison of a run straight to the server with one through rttscope.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::mariadb::{Account, DB, TestDb};
use crate::proxy::TestProxy;

/// The workspace root: the venv and the scripts are found from here.
fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The Python of the test venv that `scripts/install-deps.sh` creates, with the `mariadb`
/// (Connector/Python over libmariadb) and `pymysql` modules installed.
pub fn python() -> Result<PathBuf> {
    let python = repo().join("target/test-venv/bin/python");
    if !python.exists() {
        bail!("{} not found: run scripts/install-deps.sh to create the test venv", python.display());
    }
    Ok(python)
}

/// A script of `integration-tests/python/`.
pub fn script(name: &str) -> PathBuf {
    repo().join("integration-tests/python").join(name)
}

/// `--host --port --user --password --db` for the scripts, pointed at `addr` (the server or a
/// proxy in front of it).
pub fn conn_args(addr: SocketAddr, account: Account) -> Vec<String> {
    [
        ("--host", addr.ip().to_string()),
        ("--port", addr.port().to_string()),
        ("--user", account.user.to_string()),
        ("--password", account.password.to_string()),
        ("--db", DB.to_string()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect()
}

/// Runs `integration-tests/python/<script>` with the venv's Python and returns its stdout;
/// a non-zero exit is an error that carries both streams.
pub fn run_python<S: AsRef<std::ffi::OsStr>>(script_name: &str, args: &[S]) -> Result<String> {
    let mut cmd = Command::new(python()?);
    cmd.arg(script(script_name)).args(args).env("PYTHONIOENCODING", "utf-8").env("PYTHONHASHSEED", "0");
    let out = run(cmd, Duration::from_secs(300))?;
    if !out.status.success() {
        bail!("{script_name} failed ({}):\n--- stdout\n{}\n--- stderr\n{}", out.status, out.stdout, out.stderr);
    }
    Ok(out.stdout)
}

/// What a finished program printed.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` to the end, stdin closed, killing it after `limit`: a client that hangs behind a
/// broken proxy must fail the test, not stall it.
pub fn run(mut cmd: Command, limit: Duration) -> Result<Output> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {cmd:?}"))?;
    wait_with_output(child, limit).with_context(|| format!("{cmd:?}"))
}

/// Collects a spawned child's piped stdout and stderr until it exits, or kills it after `limit`.
pub fn wait_with_output(mut child: Child, limit: Duration) -> Result<Output> {
    let drain = |stream: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut s) = stream {
                let _ = s.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let (out, err) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
            bail!("still running after {limit:?}; killed\n--- stdout\n{out}\n--- stderr\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let join = |h: std::thread::JoinHandle<String>| h.join().map_err(|_| anyhow!("reader thread panicked"));
    Ok(Output { status, stdout: join(stdout)?, stderr: join(stderr)? })
}

/// The first of `names` on `PATH` or in `/usr/bin`.
fn find_tool(names: &[&str]) -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.push(PathBuf::from("/usr/bin"));
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|path| path.is_file())
        .ok_or_else(|| anyhow!("none of {names:?} found; run scripts/install-deps.sh"))
}

/// A MariaDB client tool for `account` at `addr` over TCP, without TLS (so a proxy sees plain
/// packets) and without option files.
fn tool(names: &[&str], addr: SocketAddr, account: Account) -> Result<Command> {
    let mut cmd = Command::new(find_tool(names)?);
    // --no-defaults must come first.
    cmd.arg("--no-defaults")
        .arg("--protocol=TCP")
        .arg(format!("--host={}", addr.ip()))
        .arg(format!("--port={}", addr.port()))
        .arg(format!("--user={}", account.user))
        .arg(format!("--password={}", account.password))
        .arg("--skip-ssl");
    Ok(cmd)
}

/// `mariadb-admin` (COM_PING, COM_STATISTICS, COM_REFRESH, COM_DEBUG, ...); add its commands.
pub fn mariadb_admin(addr: SocketAddr, account: Account) -> Result<Command> {
    tool(&["mariadb-admin", "mysqladmin"], addr, account)
}

/// `mariadb-binlog --read-from-remote-server` (COM_BINLOG_DUMP); add options and log names.
pub fn mariadb_binlog(addr: SocketAddr, account: Account) -> Result<Command> {
    let mut cmd = tool(&["mariadb-binlog", "mysqlbinlog"], addr, account)?;
    cmd.arg("--read-from-remote-server");
    Ok(cmd)
}

/// The `mariadb` command-line client binary (for a pty session, where the harness's batch-mode
/// [`crate::mariadb::TestDb::mariadb_cli`] will not do).
pub fn mariadb_cli_binary() -> Result<PathBuf> {
    find_tool(&["mariadb", "mysql"])
}

/// Runs `workload` straight to the server, then through a fresh proxy, and returns both
/// results. The proxy must not have closed any connection for a protocol error: a client
/// can get identical output from a connection the proxy cut at its very end.
pub fn direct_and_proxied<T>(workload: impl Fn(SocketAddr) -> T) -> (T, T) {
    let direct = workload(TestDb::shared().upstream_addr());
    let proxy = TestProxy::start();
    let proxied = workload(proxy.addr());
    let errors = proxy.stats().protocol_errors.load(Ordering::Relaxed);
    assert_eq!(errors, 0, "rttscope closed {errors} connection(s) on a protocol error (see its log)");
    (direct, proxied)
}

/// Equal, or a panic that shows the first line that differs rather than two huge strings.
pub fn assert_same(what: &str, direct: &str, proxied: &str) {
    if direct == proxied {
        return;
    }
    let (d, p): (Vec<&str>, Vec<&str>) = (direct.lines().collect(), proxied.lines().collect());
    let i = d.iter().zip(&p).position(|(a, b)| a != b).unwrap_or(d.len().min(p.len()));
    let line = |v: &[&str]| v.get(i).map(|l| l.chars().take(400).collect::<String>()).unwrap_or("<end>".into());
    let whole = match direct.len() + proxied.len() < 8000 {
        true => format!("\n--- direct\n{direct}\n--- proxied\n{proxied}"),
        false => String::new(),
    };
    panic!(
        "{what}: output through rttscope differs from direct at line {} ({} vs {} lines)\n direct: {}\nproxied: {}{whole}",
        i + 1,
        d.len(),
        p.len(),
        line(&d),
        line(&p)
    );
}

/// Replaces each run of digits in every line containing one of `markers` with `#`: connection
/// ids, ports, uptimes, timings and counters that legitimately differ between two connections.
pub fn mask_digits(text: &str, markers: &[&str]) -> String {
    let mask = |line: &str| {
        let mut out = String::with_capacity(line.len());
        for c in line.chars() {
            match (c.is_ascii_digit(), out.ends_with('#')) {
                (true, true) => {}
                (true, false) => out.push('#'),
                (false, _) => out.push(c),
            }
        }
        out
    };
    let lines = text.lines().map(|l| if markers.iter().any(|m| l.contains(m)) { mask(l) } else { l.to_string() });
    lines.collect::<Vec<_>>().join("\n")
}

/// Whether the server is MariaDB (printing why not): most client tests lean on MariaDB-only
/// tools, types and SQL (sequence tables, INET6, UUID, mariadb-binlog).
pub fn is_mariadb() -> bool {
    let db = TestDb::shared();
    let yes = db.version().contains("MariaDB");
    if !yes {
        crate::skip(format!("server {} is not MariaDB", db.version()));
    }
    yes
}
