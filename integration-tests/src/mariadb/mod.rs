//! The MariaDB server the tests run against, and the fixture database and users on it.
//!
//! [`TestDb::shared`] starts one private throwaway server per test process — or, when
//! `RTTSCOPE_TEST_MYSQL_URL` is set, uses that server — and creates, idempotently:
//!
//! | account       | password    | authentication          | privileges                     |
//! |---------------|-------------|-------------------------|--------------------------------|
//! | `rtt_native`  | `native-pw` | `mysql_native_password` | ALL on `rttscope_test.*`       |
//! | `rtt_ed25519` | `ed-pw`     | `ed25519`               | ALL on `rttscope_test.*`       |
//! | `rtt_other`   | `other-pw`  | server default          | ALL on `rttscope_test.*`       |
//! | `rtt_admin`   | `admin-pw`  | server default          | ALL on `*.*` WITH GRANT OPTION |
//!
//! each as `@'%'` and `@'localhost'`, so TCP logins work whether or not the server resolves
//! names (an anonymous `''@'localhost'` would otherwise shadow `@'%'`). `root` is left alone.
//!
//! Every URL and `OptsBuilder` made here sets `prefer_socket=false`: by default mysql_async, once
//! logged in over TCP to a loopback server, reads `@@socket` and silently reconnects through the
//! unix socket — which would bypass the proxy under test.

use std::fs::{self, File};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, OnceLock, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder};

mod server;
mod tls;
use server::*;
pub use tls::{TLS_ED25519, TLS_NATIVE, TLS_PLAIN, TLS_X509, TestCerts, TlsDb};

/// Names an existing server to use instead of a private one, e.g. `mysql://root:pw@127.0.0.1:3306/`.
/// Its user must be allowed to create users and grant privileges.
pub const URL_ENV: &str = "RTTSCOPE_TEST_MYSQL_URL";
/// The fixture database; every fixture user has ALL on it.
pub const DB: &str = "rttscope_test";

/// A fixture login.
#[derive(Clone, Copy, Debug)]
pub struct Account {
    pub user: &'static str,
    pub password: &'static str,
}

const fn account(user: &'static str, password: &'static str) -> Account {
    Account { user, password }
}

pub const NATIVE: Account = account("rtt_native", "native-pw");
/// Only present when [`TestDb::has_ed25519`] (always on a private server).
pub const ED25519: Account = account("rtt_ed25519", "ed-pw");
/// A second ordinary user, for COM_CHANGE_USER.
pub const OTHER: Account = account("rtt_other", "other-pw");
pub const ADMIN: Account = account("rtt_admin", "admin-pw");

/// Temp dirs of private servers start with this, so a later run can find and remove the ones a
/// killed run left behind.
const DIR_PREFIX: &str = "rttscope-mariadb-";
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Passed to both `mariadb-install-db` and `mariadbd`, so the redo log is created at the size the
/// server expects. Durability is worthless here; startup time and test speed are not. Native AIO
/// is off because it means io_uring, which Docker's default seccomp profile forbids.
const INNODB_ARGS: &[&str] =
    &["--innodb-log-file-size=8M", "--innodb-flush-log-at-trx-commit=0", "--innodb-use-native-aio=0"];

/// A MariaDB (or MySQL) server with the fixtures in place. Get it with [`TestDb::shared`].
pub struct TestDb {
    addr: SocketAddr,
    facts: Facts,
    private: Option<PrivateServer>,
}

/// Failures are kept too, so that after a failed start every test reports the cause at once
/// instead of each retrying a 60 s startup.
static SHARED: OnceLock<Result<TestDb, String>> = OnceLock::new();

impl TestDb {
    /// The process-wide server, started on first use. Blocking; safe from any thread or runtime.
    pub fn shared() -> &'static TestDb {
        match SHARED.get_or_init(|| TestDb::start().map_err(|e| format!("{e:#}"))) {
            Ok(db) => db,
            Err(e) => panic!("test database unavailable: {e}"),
        }
    }

    fn start() -> Result<TestDb> {
        match std::env::var(URL_ENV) {
            Ok(url) if !url.is_empty() => Self::existing(&url),
            _ => Self::private(),
        }
    }

    fn existing(url: &str) -> Result<TestDb> {
        let opts = Opts::from_url(url).with_context(|| format!("{URL_ENV}={url:?}"))?;
        let hostport = (opts.ip_or_hostname(), opts.tcp_port());
        let addrs: Vec<SocketAddr> = hostport.to_socket_addrs()?.collect();
        // Prefer IPv4: a proxy test that dials `upstream_addr()` should reach what `localhost` means.
        let addr = *addrs
            .iter()
            .find(|a| a.is_ipv4())
            .or(addrs.first())
            .ok_or_else(|| anyhow!("{URL_ENV}: {hostport:?} resolves to nothing"))?;
        let facts = create_fixtures(OptsBuilder::from_opts(opts).prefer_socket(false).into())
            .with_context(|| format!("creating fixtures through {URL_ENV}"))?;
        Ok(TestDb { addr, facts, private: None })
    }

    fn private() -> Result<TestDb> {
        let server = PrivateServer::start()?;
        // install-db made root@localhost with no password; the socket is ours alone.
        let root = OptsBuilder::default().socket(Some(server.socket.to_string_lossy())).user(Some("root"));
        let facts = match create_fixtures(root.into()) {
            Ok(facts) => facts,
            Err(e) => {
                server.kill();
                return Err(e.context(format!("creating fixtures\n{}", server.logs())));
            }
        };
        if !facts.ed25519 {
            server.kill();
            bail!("the auth_ed25519 server plugin did not load\n{}", server.logs());
        }
        // A static is never dropped, so no Drop impl could stop the server or remove its files.
        // SAFETY: registers a plain extern "C" fn that never unwinds.
        #[allow(unsafe_code)]
        unsafe {
            libc::atexit(stop_private_server_at_exit)
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], server.port));
        Ok(TestDb { addr, facts, private: Some(server) })
    }

    /// A private server of the caller's own inside network namespace `ns`, listening on
    /// `bind_ip:3306` there, with the fixtures in place: the far end of a WAN emulator link.
    /// Dropping the handle stops the server and removes its files.
    pub fn start_in_namespace(ns: &str, bind_ip: Ipv4Addr) -> Result<NamespacedDb> {
        const PORT: u16 = 3306;
        let server = PrivateServer::start_in_namespace(ns, bind_ip, PORT)?;
        let root = OptsBuilder::default().socket(Some(server.socket.to_string_lossy())).user(Some("root"));
        let facts = match create_fixtures(root.into()) {
            Ok(facts) => facts,
            Err(e) => {
                let logs = server.logs();
                server.stop();
                return Err(e.context(format!("creating fixtures\n{logs}")));
            }
        };
        let db = TestDb { addr: SocketAddr::from((bind_ip, PORT)), facts, private: Some(server) };
        Ok(NamespacedDb(db))
    }

    /// What a proxy under test should dial.
    pub fn upstream_addr(&self) -> SocketAddr {
        self.addr
    }
    pub fn host(&self) -> String {
        self.addr.ip().to_string()
    }
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
    /// `SELECT VERSION()`, e.g. `10.11.19-MariaDB-0+deb12u1`.
    pub fn version(&self) -> &str {
        &self.facts.version
    }
    /// 64 MiB on a private server; whatever an existing server has.
    pub fn max_allowed_packet(&self) -> u64 {
        self.facts.max_allowed_packet
    }
    /// Whether the `rtt_ed25519` fixture exists (an existing server may refuse the plugin).
    pub fn has_ed25519(&self) -> bool {
        self.facts.ed25519
    }
    /// True when this process started the server itself.
    pub fn is_private(&self) -> bool {
        self.private.is_some()
    }
    /// The private server's unix socket (root may log in there without a password).
    pub fn socket_path(&self) -> Option<&Path> {
        self.private.as_ref().map(|s| s.socket.as_path())
    }

    /// `mysql://user:password@host:port/db?prefer_socket=false` for [`Opts::from_url`].
    pub fn url(&self, user: &str, password: &str, db: Option<&str>) -> String {
        self.url_via(self.addr, user, password, db)
    }
    /// Like [`TestDb::url`] but pointed at `addr`, e.g. a proxy forwarding to this server.
    pub fn url_via(&self, addr: SocketAddr, user: &str, password: &str, db: Option<&str>) -> String {
        let creds = match password {
            "" => encode(user),
            pw => format!("{}:{}", encode(user), encode(pw)),
        };
        format!("mysql://{creds}@{addr}/{}?prefer_socket=false", db.map(encode).unwrap_or_default())
    }
    /// `rtt_admin`, with every privilege, no default database.
    pub fn admin_url(&self) -> String {
        self.url(ADMIN.user, ADMIN.password, None)
    }

    /// Options for `user` on this server, default database [`DB`].
    pub fn opts(&self, user: &str, password: &str) -> OptsBuilder {
        self.opts_via(self.addr, user, password)
    }
    /// Like [`TestDb::opts`] but pointed at `addr`, e.g. a proxy forwarding to this server.
    pub fn opts_via(&self, addr: SocketAddr, user: &str, password: &str) -> OptsBuilder {
        OptsBuilder::default()
            .ip_or_hostname(addr.ip().to_string())
            .tcp_port(addr.port())
            .user(Some(user))
            .pass(Some(password))
            .db_name(Some(DB))
            .prefer_socket(false)
    }

    /// A `mariadb` command-line client for `user` at `addr` over TCP, in batch mode (tab-separated
    /// output, column names on; add `-N` to drop them), without TLS so a proxy sees plain packets,
    /// with LOCAL INFILE allowed. Add `-e SQL` or pipe SQL into stdin.
    pub fn mariadb_cli(&self, addr: SocketAddr, user: &str, password: &str, db: Option<&str>) -> Command {
        let (_, no_tls_flag) = cli().unwrap_or_else(|e| panic!("{e}"));
        self.mariadb_cli_tls(addr, user, password, db, no_tls_flag.as_slice())
    }

    /// Like [`TestDb::mariadb_cli`], with `tls` options in place of the one that turns TLS off
    /// (`--ssl`, `--ssl-ca=FILE`, `--ssl-verify-server-cert`; none: the client's default).
    pub fn mariadb_cli_tls(
        &self,
        addr: SocketAddr,
        user: &str,
        password: &str,
        db: Option<&str>,
        tls: &[&str],
    ) -> Command {
        let (path, _) = cli().unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = Command::new(path);
        // --no-defaults must come first; it keeps /etc/mysql/*.cnf and ~/.my.cnf out of tests.
        cmd.arg("--no-defaults")
            .arg("--protocol=TCP")
            .arg(format!("--host={}", addr.ip()))
            .arg(format!("--port={}", addr.port()))
            .arg(format!("--user={user}"))
            .arg(format!("--password={password}"))
            .args(["--local-infile=1", "--batch"]);
        cmd.args(tls);
        if let Some(db) = db {
            cmd.arg(format!("--database={db}"));
        }
        cmd
    }
}

/// A [`TestDb`] owned by one test (see [`TestDb::start_in_namespace`]); stops on drop, where
/// the shared one lives until the process exits.
pub struct NamespacedDb(TestDb);

impl std::ops::Deref for NamespacedDb {
    type Target = TestDb;
    fn deref(&self) -> &TestDb {
        &self.0
    }
}

impl Drop for NamespacedDb {
    fn drop(&mut self) {
        if let Some(server) = &self.0.private {
            server.stop();
        }
    }
}

/// What the fixtures step learned about the server.
struct Facts {
    version: String,
    max_allowed_packet: u64,
    ed25519: bool,
}

/// `shared()` may run inside a test's runtime, where `block_on` panics; a thread of our own with
/// its own runtime works from anywhere.
fn create_fixtures(admin: Opts) -> Result<Facts> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(create_fixtures_async(admin))
    })
    .join()
    .map_err(|_| anyhow!("the fixture thread panicked"))?
}

async fn create_fixtures_async(admin: Opts) -> Result<Facts> {
    let mut conn = mysql_async::Conn::new(admin).await.context("connecting to create fixtures")?;
    let version: String = conn.query_first("SELECT VERSION()").await?.unwrap_or_default();
    let mariadb = version.contains("MariaDB");
    let mut ed25519 = mariadb && ed25519_active(&mut conn).await?;
    if mariadb && !ed25519 {
        // An existing server need not load it; installing it persists (in mysql.plugin). If we
        // may not, the ed25519 fixture is simply absent and has_ed25519() says so.
        if conn.query_drop("INSTALL SONAME 'auth_ed25519'").await.is_ok() {
            ed25519 = ed25519_active(&mut conn).await?;
        }
    }
    conn.query_drop(format!("CREATE DATABASE IF NOT EXISTS {DB}")).await?;
    for (account, identified) in fixture_accounts(mariadb, ed25519) {
        for host in ["%", "localhost"] {
            let who = format!("'{}'@'{host}'", account.user);
            // CREATE IF NOT EXISTS + ALTER rather than CREATE OR REPLACE: replacing drops the
            // grants for a moment, under the feet of another test process sharing the server.
            for sql in [
                format!("CREATE USER IF NOT EXISTS {who} {identified}"),
                format!("ALTER USER {who} {identified}"),
                if account.user == ADMIN.user {
                    format!("GRANT ALL PRIVILEGES ON *.* TO {who} WITH GRANT OPTION")
                } else {
                    format!("GRANT ALL PRIVILEGES ON {DB}.* TO {who}")
                },
            ] {
                conn.query_drop(&sql).await.with_context(|| sql.clone())?;
            }
        }
    }
    let max_allowed_packet: u64 = conn.query_first("SELECT @@max_allowed_packet").await?.unwrap_or_default();
    conn.disconnect().await?;
    Ok(Facts { version, max_allowed_packet, ed25519 })
}

async fn ed25519_active(conn: &mut mysql_async::Conn) -> Result<bool> {
    let sql =
        "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519' AND PLUGIN_STATUS = 'ACTIVE'";
    Ok(conn.query_first::<u64, _>(sql).await?.unwrap_or(0) > 0)
}

/// Each fixture account with its `IDENTIFIED ...` clause, in this server's dialect.
fn fixture_accounts(mariadb: bool, ed25519: bool) -> Vec<(Account, String)> {
    let by = |a: Account| format!("IDENTIFIED BY '{}'", a.password);
    let via = |plugin, a: Account| format!("IDENTIFIED VIA {plugin} USING PASSWORD('{}')", a.password);
    let native = match mariadb {
        true => via("mysql_native_password", NATIVE),
        false => format!("IDENTIFIED WITH mysql_native_password BY '{}'", NATIVE.password),
    };
    let mut accounts = vec![(NATIVE, native), (OTHER, by(OTHER)), (ADMIN, by(ADMIN))];
    if ed25519 {
        accounts.push((ED25519, via("ed25519", ED25519)));
    }
    accounts
}

/// How many times [`ed25519_login`] tries before a 1045 counts as a real refusal.
const ED25519_TRIES: usize = 4;

/// Runs `login` — anything that authenticates an ed25519 account through mysql_async — again
/// when the server refuses it with 1045, at most [`ED25519_TRIES`] times.
///
/// mysql_async 0.37 reads auth-switch data through `AuthSwitchRequest::plugin_data`, which drops
/// one trailing NUL byte (mysql_native_password's scramble ends in one). client_ed25519's data is
/// a random 32-byte nonce, so one login in 256 signs the first 31 bytes only and the server
/// answers 1045 — directly exactly as through rttscope. A bug in the relay would fail every try;
/// four unlucky nonces in a row happen once in 2^32.
pub async fn ed25519_login<T, F, Fut>(mut login: F) -> std::result::Result<T, mysql_async::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, mysql_async::Error>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match login().await {
            Err(mysql_async::Error::Server(e)) if e.code == 1045 && tries < ED25519_TRIES => {
                eprintln!("ed25519 login refused ({}), retrying: mysql_async drops a nonce's trailing NUL", e.message);
            }
            other => return other,
        }
    }
}

/// `rtt_native` through `addr`, with the settings mysql_async would otherwise query at login
/// given up front (`max_allowed_packet`, `wait_timeout`): the first command the server sees is
/// the test's own.
pub fn native_opts(addr: SocketAddr) -> OptsBuilder {
    TestDb::shared()
        .opts_via(addr, NATIVE.user, NATIVE.password)
        .max_allowed_packet(Some(16 << 20))
        .wait_timeout(Some(28_800))
}
