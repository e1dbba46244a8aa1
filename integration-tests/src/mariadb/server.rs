//! A private `mariadbd` in a temp dir of its own: installed, started, waited for, and
//! killed with the test process.

use super::*;
/// A `mariadbd` this process started, in a temp dir of its own.
pub(super) struct PrivateServer {
    dir: PathBuf,
    pub(super) socket: PathBuf,
    pub(super) port: u16,
    pid: u32,
    /// Set by the owner thread when it reaps the server.
    exited: Arc<OnceLock<ExitStatus>>,
}

impl PrivateServer {
    pub(super) fn start() -> Result<PrivateServer> {
        Self::start_with(|_| Ok(Vec::new()))
    }

    /// Like [`start`](Self::start), with more `mariadbd` options: `extra` gets the server's
    /// fresh temp dir (to write files there, certificates say) and returns the options.
    pub(super) fn start_with(extra: impl FnOnce(&Path) -> Result<Vec<String>>) -> Result<PrivateServer> {
        let (mariadbd, dir, as_root) = Self::install()?;
        let extra = extra(&dir)?;
        // The port is free when we look but may be taken before mariadbd binds it; then it exits
        // saying so, and we try another.
        let mut attempt = 1;
        loop {
            let server = Self::spawn_in(&mariadbd, dir.clone(), free_port()?, as_root, None, &extra)?;
            match server.wait_ready() {
                Ok(()) => return Ok(server),
                Err(_) if attempt < 3 && server.logs().contains("Address already in use") => attempt += 1,
                Err(e) => return Err(e),
            }
            let _ = fs::remove_file(server.error_log());
        }
    }

    /// A fresh datadir in a temp dir of our own: (mariadbd, the dir, whether we run as root).
    fn install() -> Result<(PathBuf, PathBuf, bool)> {
        let mariadbd = find_binary(&["mariadbd", "mysqld"])?;
        let install_db = find_binary(&["mariadb-install-db", "mysql_install_db"])?;
        let root = temp_root();
        remove_stale_dirs(&root);
        let dir = tempfile::Builder::new().prefix(DIR_PREFIX).tempdir_in(&root)?.keep();
        fs::write(dir.join("owner.pid"), std::process::id().to_string())?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        #[allow(unsafe_code)]
        let as_root = unsafe { libc::geteuid() } == 0;

        let mut install = Command::new(&install_db);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            // The bootstrap server's temp tables in a dir of our own, as the server's below: a
            // mariadbd starting meanwhile deletes every #sql* file in a shared /tmp (CI saw
            // "Unknown table 'mysql.tmp_user_sys'" when the benches smoke test started two).
            .arg(format!("--tmpdir={}", dir.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"])
            .args(INNODB_ARGS);
        if as_root {
            install.arg("--user=root");
        }
        let out = install.output().with_context(|| format!("running {}", install_db.display()))?;
        if !out.status.success() {
            bail!(
                "{} failed ({}) in {}:\n{}{}",
                install_db.display(),
                out.status,
                dir.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok((mariadbd, dir, as_root))
    }

    /// A server of its own inside network namespace `ns` (named, as `ip netns` knows it),
    /// listening on `bind_ip:port` there: the far end of a WAN emulator link. The namespace is
    /// fresh, so the port is ours without probing. Fixtures go in through the unix socket, which
    /// as a file is reachable from any network namespace.
    pub(super) fn start_in_namespace(ns: &str, bind_ip: Ipv4Addr, port: u16) -> Result<PrivateServer> {
        let (mariadbd, dir, as_root) = Self::install()?;
        let server = Self::spawn_in(&mariadbd, dir, port, as_root, Some((ns, bind_ip)), &[])?;
        if let Err(e) = server.wait_ready() {
            server.stop();
            return Err(e.context(format!("mariadbd in namespace {ns}")));
        }
        Ok(server)
    }

    /// `netns`: run inside that namespace, bound to that address instead of loopback.
    /// `extra`: more options, after the usual ones.
    fn spawn_in(
        mariadbd: &Path,
        dir: PathBuf,
        port: u16,
        as_root: bool,
        netns: Option<(&str, Ipv4Addr)>,
        extra: &[String],
    ) -> Result<PrivateServer> {
        let socket = dir.join("mysqld.sock");
        let mut cmd = match netns {
            // `ip netns exec` enters the namespace and execs mariadbd in place (no fork): the pid
            // we kill is the server's, and PR_SET_PDEATHSIG set below survives both execs.
            Some((ns, _)) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", ns]).arg(mariadbd);
                cmd
            }
            None => Command::new(mariadbd),
        };
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", dir.join("data/error.log").display()))
            .arg(format!("--port={port}"))
            // Temp tables (a server-side cursor's result, big sorts) in a dir of our own: a
            // starting mariadbd deletes every #sql* file in its tmpdir, so in a shared /tmp any
            // other test server starting up removed this one's, under an open cursor's feet.
            .arg(format!("--tmpdir={}", dir.display()))
            // 600 unless the caller needs more (the soak holds 1,000 connections).
            .arg(format!("--max-connections={}", max_connections()))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                "--max-allowed-packet=64M",
                "--local-infile=1",
                "--innodb-buffer-pool-size=256M",
                "--plugin-load-add=auth_ed25519",
                // What Debian's packaged config sets; --no-defaults would leave latin1.
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_general_ci",
                // A binary log, so that replication clients (mariadb-binlog: COM_BINLOG_DUMP)
                // have something to read. Closed logs are immutable, which tests rely on.
                "--log-bin=mysql-bin",
                "--server-id=1",
                "--binlog-format=ROW",
                // Else, with a binary log, only SUPER may create stored functions.
                "--log-bin-trust-function-creators=1",
            ])
            .args(INNODB_ARGS)
            .args(extra);
        if let Some((_, ip)) = netns {
            // After the loopback default: of a repeated option, mariadbd keeps the last.
            cmd.arg(format!("--bind-address={ip}"));
        }
        if as_root {
            cmd.arg("--user=root");
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(File::create(dir.join("mariadbd.stderr"))?);
        let parent = std::process::id() as libc::pid_t;
        // The server lives in a static that is never dropped, and a test run can be killed
        // outright; PDEATHSIG makes the kernel kill the server whenever we die, however we die.
        // SAFETY: runs between fork and exec; prctl and getppid are async-signal-safe and neither
        // allocates nor touches the parent's memory.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // We may have died between fork and prctl; then no signal will ever come.
                if libc::getppid() != parent {
                    return Err(io::Error::other("test process exited before mariadbd started"));
                }
                Ok(())
            });
        }
        // PDEATHSIG fires when the parent *thread* exits, not the process: a test's thread would
        // take the server down with it when that test finished. So a thread that lives as long as
        // the server forks it, then waits for it.
        let exited = Arc::new(OnceLock::new());
        let (tx, rx) = mpsc::channel();
        let reaped = exited.clone();
        std::thread::Builder::new().name("mariadbd-owner".into()).spawn(move || match cmd.spawn() {
            Err(e) => drop(tx.send(Err(e))),
            Ok(mut child) => {
                let _ = tx.send(Ok(child.id()));
                if let Ok(status) = child.wait() {
                    let _ = reaped.set(status);
                }
            }
        })?;
        let pid = rx.recv()?.with_context(|| format!("starting {}", mariadbd.display()))?;
        Ok(PrivateServer { dir, socket, port, pid, exited })
    }

    /// The socket lives in our own dir, so accepting there proves *our* server is up, and
    /// mariadbd binds its TCP port before it creates the socket.
    pub(super) fn wait_ready(&self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.exited.get() {
                bail!("mariadbd exited during startup ({status})\n{}", self.logs());
            }
            if UnixStream::connect(&self.socket).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill();
                bail!("mariadbd did not accept connections within {START_TIMEOUT:?}\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn error_log(&self) -> PathBuf {
        self.dir.join("data/error.log")
    }

    /// The end of the server's error log and stderr, for failure messages.
    pub(super) fn logs(&self) -> String {
        let tail = |path: PathBuf| {
            let text = fs::read_to_string(&path).unwrap_or_else(|e| format!("({e})"));
            let lines: Vec<&str> = text.lines().collect();
            format!("--- {} (last 40 lines)\n{}\n", path.display(), lines[lines.len().saturating_sub(40)..].join("\n"))
        };
        tail(self.error_log()) + &tail(self.dir.join("mariadbd.stderr"))
    }

    pub(super) fn kill(&self) {
        if self.exited.get().is_none() {
            // SAFETY: kill has no memory-safety preconditions; the pid is our unreaped child.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(self.pid as libc::pid_t, libc::SIGKILL)
            };
        }
    }

    /// Kills the server, waits for its owner thread to reap it, and removes its files.
    pub(super) fn stop(&self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.exited.get().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

pub(super) extern "C" fn stop_private_server_at_exit() {
    if let Some(Ok(TestDb { private: Some(server), .. })) = SHARED.get() {
        server.stop();
    }
}

/// Removes private-server dirs whose owning test process is gone (killed before its exit hook).
pub(super) fn remove_stale_dirs(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(DIR_PREFIX) {
            continue;
        }
        let path = entry.path();
        let owner = fs::read_to_string(path.join("owner.pid")).ok().and_then(|s| s.trim().parse::<u32>().ok());
        let stale = match owner {
            Some(pid) => !Path::new("/proc").join(pid.to_string()).exists(),
            // The owner writes its pid just after creating the dir: a young dir without one may
            // belong to a run starting right now.
            None => entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(600)),
        };
        if stale {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// `$TMPDIR`, unless it is too long for a unix socket path (108 bytes; ours adds ~36).
pub(super) fn temp_root() -> PathBuf {
    let root = std::env::temp_dir();
    if root.as_os_str().len() > 70 { PathBuf::from("/tmp") } else { root }
}

pub(super) fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The first of `names` that is an executable on `PATH` or in the usual sbin/bin dirs (`sbin` is
/// often not on a non-root `PATH`).
pub(super) fn find_binary(names: &[&str]) -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from));
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|path| fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
        .ok_or_else(|| {
            anyhow!("none of {names:?} found; run scripts/install-deps.sh, or set {URL_ENV} to use an existing server")
        })
}

/// The client binary, and whichever of `--skip-ssl` (MariaDB) and `--ssl-mode=DISABLED` (MySQL)
/// it knows.
pub(super) fn cli() -> Result<&'static (PathBuf, Option<&'static str>), &'static str> {
    static CLI: OnceLock<Result<(PathBuf, Option<&'static str>), String>> = OnceLock::new();
    let cli = CLI.get_or_init(|| {
        let path = find_binary(&["mariadb", "mysql"]).map_err(|e| e.to_string())?;
        let help = Command::new(&path).arg("--help").output().map_err(|e| e.to_string())?;
        let help = String::from_utf8_lossy(&help.stdout);
        let flag = match (help.contains("--ssl-mode"), help.contains("--ssl")) {
            (true, _) => Some("--ssl-mode=DISABLED"),
            (false, true) => Some("--skip-ssl"),
            (false, false) => None,
        };
        Ok((path, flag))
    });
    cli.as_ref().map_err(String::as_str)
}

/// Percent-encodes all but RFC 3986 unreserved characters, for URL userinfo and path.
pub(super) fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `RTTSCOPE_TEST_MYSQL_MAX_CONNECTIONS` for a private server, else 600.
fn max_connections() -> u32 {
    std::env::var("RTTSCOPE_TEST_MYSQL_MAX_CONNECTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(600)
}
