//! A MySQL-8-style server for the auth tests: `integration-tests/python/mysql8_server.py`,
//! mysql-mimic with caching_sha2_password and sha256_password as MySQL documents them (fast
//! and full authentication, the RSA key exchange over plain connections), in the test venv.
//! Each instance listens on a free loopback port and logs every login (plugin, fast or full,
//! which leg) to a file the test reads.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use rttscope_config::Config;

use crate::browser::which;
use crate::clients::{python, run, run_python, script};
use crate::proxy::{TestProxy, proxy_to};

fn repo() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The accounts the server knows, each with its plugin: `user:password` as the login
/// script takes them.
pub const SHA2: &str = "u_sha2:a-sha2-password-longer-than-20";
pub const SHA256: &str = "u_sha256:sha256-pw";
pub const NATIVE: &str = "u_native:native-pw";

/// Runs `python/mysql8_features.py` at `addr` as `account`: MySQL's protocol features as
/// MySQL's own clients use them (libmysqlclient, Connector/Python, PyMySQL), `scenario` with
/// `args`. Returns what the client saw, one line a fact.
pub fn features(addr: SocketAddr, account: &str, scenario: &str, args: &[&str]) -> Result<Vec<String>> {
    let mut argv = vec![addr.ip().to_string(), addr.port().to_string(), account.to_owned(), scenario.to_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    Ok(run_python("mysql8_features.py", &argv)?.lines().map(str::to_owned).collect())
}

/// The user name of an account (`user:password`).
pub fn user(account: &str) -> &str {
    account.split(':').next().unwrap_or(account)
}

/// The plugin the server gives an account.
pub fn plugin(account: &str) -> &'static str {
    match user(account) {
        "u_sha2" => "caching_sha2_password",
        "u_sha256" => "sha256_password",
        _ => "mysql_native_password",
    }
}

/// A server of `mode` and rttscope in front of it with the default config (TLS on the
/// long hop whenever the server offers it).
pub fn server_and_proxy(mode: Mode) -> Option<(Mysql8Server, TestProxy)> {
    server_and_proxy_with(mode, |_| {})
}

/// [`server_and_proxy`], the proxy's config changed by `tweak`.
pub fn server_and_proxy_with(mode: Mode, tweak: impl FnOnce(&mut Config)) -> Option<(Mysql8Server, TestProxy)> {
    match Mysql8Server::start(mode) {
        Ok(server) => {
            let proxy = proxy_to(server.addr(), tweak);
            Some((server, proxy))
        }
        Err(e) => {
            crate::skip(format!("no MySQL-8-style server: {e:#}"));
            None
        }
    }
}

/// A mysql_async connection to `addr` as `account`, with TLS (not verified: the server's
/// certificate is self-signed) or without.
pub async fn mysql_async_conn(addr: SocketAddr, account: &str, tls: bool) -> Result<mysql_async::Conn> {
    mysql_async_conn_with(addr, account, tls, false).await
}

/// [`mysql_async_conn`], over the compressed protocol (zlib, mysql_async's only one) if
/// `compress`.
pub async fn mysql_async_conn_with(
    addr: SocketAddr,
    account: &str,
    tls: bool,
    compress: bool,
) -> Result<mysql_async::Conn> {
    let (name, password) = account.split_once(':').unwrap_or_default();
    let tls = tls.then(|| mysql_async::SslOpts::default().with_danger_accept_invalid_certs(true));
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(name))
        .pass(Some(password))
        .prefer_socket(false)
        .ssl_opts(tls)
        .compression(compress.then(mysql_async::Compression::default));
    Ok(mysql_async::Conn::new(opts).await?)
}

/// Who the server says `conn` is logged in as, and over which leg (`USER LEG`).
pub async fn current_user(conn: &mut mysql_async::Conn) -> Result<Option<String>> {
    use mysql_async::prelude::Queryable;
    Ok(conn.query_first("SELECT CURRENT_USER()").await?)
}

/// What the server logged about compression since the last look, levels left out.
pub fn compression_lines(log: &[String]) -> Vec<String> {
    let lines = log.iter().filter(|l| l.starts_with("compression "));
    lines.map(|l| l.rsplit_once(' ').map_or(l.as_str(), |(head, _)| head).to_owned()).collect()
}

/// A running server; killed on drop.
pub struct Mysql8Server {
    child: Child,
    addr: SocketAddr,
    log: tempfile::NamedTempFile,
}

/// How the server is started.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mode {
    /// It offers TLS.
    pub tls: bool,
    /// MySQL 9: no mysql_native_password at all.
    pub mysql9: bool,
    /// sha256_password is the default plugin (the greeting's).
    pub sha256_default: bool,
}

impl Mysql8Server {
    /// Starts one; fails if the venv lacks mysql-mimic (run scripts/install-deps.sh).
    pub fn start(mode: Mode) -> Result<Mysql8Server> {
        let log = tempfile::NamedTempFile::new()?;
        let mut cmd = Command::new(python()?);
        cmd.arg(script("mysql8_server.py")).arg(log.path());
        if mode.tls {
            cmd.arg("--tls");
        }
        if mode.mysql9 {
            cmd.arg("--mysql9");
        }
        if mode.sha256_default {
            cmd.arg("--sha256-default");
        }
        let mut child =
            cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().context("starting mysql8_server.py")?;
        let stdout = child.stdout.take().context("the server's stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let Some(port) = line.trim().strip_prefix("port ").and_then(|p| p.parse::<u16>().ok()) else {
            let _ = child.kill();
            bail!("mysql8_server.py did not start (it printed {line:?}): is mysql-mimic in the test venv?");
        };
        Ok(Mysql8Server { child, addr: SocketAddr::from(([127, 0, 0, 1], port)), log })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The logins the server saw since the last cache flush, one `USER PLUGIN PATH LEG
    /// RESULT` line each, and everything before that cleared.
    pub fn take_log(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        std::fs::write(self.log.path(), "").expect("clearing the server's log");
        text.lines().filter(|l| !l.starts_with("- flush")).map(str::to_owned).collect()
    }

    /// Empties the server's cache, as a restart does (SIGHUP), and waits until it has.
    pub fn flush(&self) -> Result<()> {
        let before = self.flushes();
        let status = Command::new("kill").args(["-HUP", &self.child.id().to_string()]).status()?;
        if !status.success() {
            bail!("kill -HUP failed: {status}");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.flushes() == before {
            if std::time::Instant::now() > deadline {
                bail!("the server did not flush its cache");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    fn flushes(&self) -> usize {
        std::fs::read_to_string(self.log.path()).unwrap_or_default().matches("- flush").count()
    }

    /// Runs `python/mysql8_login.py` (`driver` `pymysql` or `mysqlclient`) or
    /// `node/mysql8_login.js` (`mysql2`): the driver logs in at `addr` over `leg` (`tls` or
    /// `plain`) as each of `accounts`, twice after emptying the server's cache (full, then
    /// fast). Returns its lines (`USER N: ANSWER`).
    pub fn logins(&self, driver: &str, addr: SocketAddr, leg: &str, accounts: &[&str]) -> Result<Vec<String>> {
        self.run_logins(driver, &addr.ip().to_string(), &addr.port().to_string(), leg, accounts)
    }

    /// [`logins`](Self::logins) by PyMySQL over the Unix socket `socket`.
    pub fn logins_via_socket(&self, socket: &std::path::Path, accounts: &[&str]) -> Result<Vec<String>> {
        self.run_logins("pymysql", &socket.display().to_string(), "0", "plain", accounts)
    }

    fn run_logins(&self, driver: &str, host: &str, port: &str, leg: &str, accounts: &[&str]) -> Result<Vec<String>> {
        let mut cmd = if driver == "mysql2" {
            let node = which("node").context("no node on PATH (scripts/install-deps.sh installs nodejs)")?;
            let mut cmd = Command::new(node);
            cmd.current_dir(repo().join("integration-tests/node")).arg("mysql8_login.js");
            cmd
        } else {
            let mut cmd = Command::new(python()?);
            cmd.arg(script("mysql8_login.py")).arg(driver);
            cmd
        };
        cmd.args([host, port, leg]).arg(self.child.id().to_string()).arg(self.log.path()).args(accounts);
        let out = run(cmd, Duration::from_secs(60))?;
        if !out.status.success() {
            bail!("mysql8_login.py {driver} failed ({}):\n{}\n{}", out.status, out.stdout, out.stderr);
        }
        Ok(out.stdout.lines().map(str::to_owned).collect())
    }
}

impl Drop for Mysql8Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
