//! The `rttscope` binary run as a child process, for what only a real
//! process shows: signals, exit codes, log lines, memory.

use std::fs;
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::wan::WanLink;

/// Names another `rttscope` binary to test instead of this workspace's: how a regression
/// test is shown to fail on the code before its fix.
pub const BINARY_ENV: &str = "RTTSCOPE_TEST_BINARY";

/// The `rttscope` binary of this workspace, built on first use if the test
/// run did not build it already (`cargo test -p` of this crate alone), or the one
/// [`BINARY_ENV`] names.
pub fn rttscope_binary() -> Result<&'static Path> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY
        .get_or_init(|| match std::env::var_os(BINARY_ENV) {
            Some(path) => Ok(PathBuf::from(path)),
            None => find_or_build("rttscope").map_err(|e| format!("{e:#}")),
        })
        .as_deref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

fn find_or_build(name: &str) -> Result<PathBuf> {
    // Test executables live in target/<profile>/deps; binaries one level up, beside other
    // binaries (a benchmark's, run with `cargo run`).
    let exe = std::env::current_exe().context("current_exe")?;
    let exe_dir = exe.parent().context("test binary has no target dir")?;
    let profile_dir = if exe_dir.ends_with("deps") { exe_dir.parent() } else { Some(exe_dir) };
    let profile_dir = profile_dir.context("test binary has no target dir")?;
    let candidate = profile_dir.join(name);
    let profile = profile_dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug");
    let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build.args(["build", "--quiet", "-p", "rttscope", "--bin", name]);
    if profile == "release" {
        build.arg("--release");
    }
    // Always ask cargo: a stale binary would test old code. It is a no-op when fresh.
    let status = build.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build of {name} failed: {status}");
    }
    if !candidate.exists() {
        bail!("{} not found after building", candidate.display());
    }
    Ok(candidate)
}

/// A free TCP port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A listen and an admin address on free loopback ports, never the same one: both are held
/// while the second is chosen (two calls of [`free_port`] can return one port twice, and
/// rttscope then refuses to start: "admin.address: must differ from listen").
pub fn free_listen_and_admin() -> (SocketAddr, SocketAddr) {
    let bind = || TcpListener::bind("127.0.0.1:0").expect("a free port");
    let (a, b) = (bind(), bind());
    (a.local_addr().expect("bound"), b.local_addr().expect("bound"))
}

/// A child process that listens on an address: its stderr kept as a log,
/// killed on drop. What rttscope and the benchmark's other relays share.
pub struct ListeningChild {
    child: Child,
    listen: SocketAddr,
    log: Arc<Mutex<Vec<u8>>>,
}

impl ListeningChild {
    /// Spawns `command` (stdin and stdout discarded, stderr captured) and
    /// waits up to 30 s until `ready` says it accepts connections on `listen`.
    pub fn spawn(mut command: Command, listen: SocketAddr, ready: &dyn Fn() -> bool) -> Result<ListeningChild> {
        let what = command.get_program().to_string_lossy().into_owned();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("spawning {what}"))?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut stderr = child.stderr.take().context("stderr piped")?;
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buf) {
                if let Ok(mut log) = sink.lock() {
                    log.extend_from_slice(&buf[..n]);
                }
            }
        });
        let mut process = ListeningChild { child, listen, log };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready() {
            if let Some(status) = process.child.try_wait()? {
                bail!("{what} exited at start ({status}):\n{}", process.log());
            }
            if Instant::now() > deadline {
                bail!("{what} did not listen on {listen} within 30 s:\n{}", process.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(process)
    }

    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process logged so far.
    pub fn log(&self) -> String {
        self.log.lock().map(|l| String::from_utf8_lossy(&l).into_owned()).unwrap_or_default()
    }

    /// The first line of the log that `wanted` accepts, waiting up to `within` for it: the
    /// log is read from the process's stderr by a thread of its own, so a line the process
    /// wrote just before something a test saw may not be in it yet.
    pub fn log_line(&self, wanted: impl Fn(&str) -> bool, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(line) = self.log().lines().find(|l| wanted(l)) {
                return Some(line.to_owned());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends a signal (e.g. `libc::SIGTERM`).
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        let pid = libc::pid_t::try_from(self.child.id()).map_err(|_| io::Error::other("pid out of range"))?;
        // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
        #[allow(unsafe_code)]
        let sent = unsafe { libc::kill(pid, signal) };
        if sent == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() > deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Fails with the log if the process has died (a crash mid-run explains odd numbers).
    pub fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait()? {
            None => Ok(()),
            Some(status) => bail!("the process exited ({status}); its log:\n{}", self.log()),
        }
    }

    /// Resident and peak resident memory in KiB (`VmRSS`, `VmHWM`).
    pub fn memory_kib(&self) -> Result<(u64, u64)> {
        let status = fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .with_context(|| format!("{name} in /proc/pid/status"))
        };
        Ok((field("VmRSS:")?, field("VmHWM:")?))
    }

    /// User plus system CPU time of all the process's threads so far:
    /// nanoseconds from `schedstat` where the kernel has it (clock ticks of
    /// 10 ms would read 0 on short runs), else `/proc/pid/stat`.
    pub fn cpu_time(&self) -> Result<Duration> {
        let pid = self.child.id();
        schedstat_ns(pid).map(Duration::from_nanos).or_else(|_| stat_ticks(pid))
    }
}

impl Drop for ListeningChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sum over threads of the first `schedstat` field: nanoseconds on a CPU.
fn schedstat_ns(pid: u32) -> Result<u64> {
    let mut total = 0u64;
    for task in fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        // A thread may exit between listing and reading.
        let Ok(text) = fs::read_to_string(&path) else { continue };
        total += text.split_whitespace().next().and_then(|f| f.parse::<u64>().ok()).context("malformed schedstat")?;
    }
    Ok(total)
}

/// utime + stime from `/proc/pid/stat`, in clock ticks.
fn stat_ticks(pid: u32) -> Result<Duration> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command name; utime and stime are 14th and 15th overall.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed /proc/pid/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).context("utime/stime");
    let total = ticks(11)? + ticks(12)?;
    // SAFETY: sysconf has no preconditions.
    #[allow(unsafe_code)]
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(Duration::from_secs_f64(total as f64 / hz as f64))
}

/// A running `rttscope` process with its own config file and log.
pub struct ProxyProcess {
    process: ListeningChild,
    admin: SocketAddr,
    dir: tempfile::TempDir,
}

impl std::ops::Deref for ProxyProcess {
    type Target = ListeningChild;
    fn deref(&self) -> &ListeningChild {
        &self.process
    }
}

impl std::ops::DerefMut for ProxyProcess {
    fn deref_mut(&mut self) -> &mut ListeningChild {
        &mut self.process
    }
}

impl ProxyProcess {
    /// Starts the binary with `yaml` appended to a config that sets `listen`
    /// and `admin` to free ports, and waits until it accepts connections.
    /// `yaml` must not set `listen` or `admin` itself.
    pub fn start(yaml: &str) -> Result<ProxyProcess> {
        Self::start_with(rttscope_binary()?, yaml, |_| {})
    }

    /// Like [`start`](Self::start) with another rttscope binary, and a last
    /// word on the command (environment, say) before it runs.
    pub fn start_with(binary: &Path, yaml: &str, configure: impl FnOnce(&mut Command)) -> Result<ProxyProcess> {
        let (listen, admin) = free_listen_and_admin();
        let ready = || TcpStream::connect(listen).is_ok();
        Self::launch(Command::new(binary), yaml, (listen, admin), &ready, configure)
    }

    /// Like [`start_with`](Self::start_with) with this workspace's binary, and `admin_keys`
    /// (indented lines such as `"  token_file: /x\n"`) in the `admin` section below its
    /// free-port address.
    pub fn start_with_admin(
        admin_keys: &str,
        yaml: &str,
        configure: impl FnOnce(&mut Command),
    ) -> Result<ProxyProcess> {
        let (listen, admin) = free_listen_and_admin();
        let ready = || TcpStream::connect(listen).is_ok();
        // Without keys, the shorthand: a config every rttscope reads, old ones included.
        let admin_yaml = match admin_keys {
            "" => format!("admin: {admin}\n"),
            keys => format!("admin:\n  address: {admin}\n{keys}"),
        };
        let yaml = format!("listen: {listen}\n{admin_yaml}{yaml}");
        Self::launch_config(Command::new(rttscope_binary()?), &yaml, (listen, admin), &ready, configure)
    }

    /// Like [`start`](Self::start), listening on the Unix socket `socket` (with
    /// `listen.socket_mode`, if given) as well as on TCP (the readiness probe uses TCP).
    pub fn start_with_unix(socket: &Path, socket_mode: Option<&str>, yaml: &str) -> Result<ProxyProcess> {
        let (listen, admin) = free_listen_and_admin();
        let ready = || TcpStream::connect(listen).is_ok();
        let mut listen_yaml = format!("listen:\n  address: [\"{listen}\", \"unix:{}\"]\n", socket.display());
        if let Some(mode) = socket_mode {
            listen_yaml.push_str(&format!("  socket_mode: \"{mode}\"\n"));
        }
        let yaml = format!("{listen_yaml}{yaml}");
        Self::launch_as(Command::new(rttscope_binary()?), &yaml, (listen, admin), &ready, |_| {}, false)
    }

    /// Like [`start`](Self::start), run behind `prefix`: a program that sets something of the
    /// process (`chrt --idle 0`: its scheduling policy) and execs rttscope in place, so
    /// [`pid`](ListeningChild::pid) is rttscope's.
    pub fn start_behind(prefix: &[&str], yaml: &str) -> Result<ProxyProcess> {
        let (listen, admin) = free_listen_and_admin();
        let ready = || TcpStream::connect(listen).is_ok();
        let (program, args) = prefix.split_first().context("an empty prefix")?;
        let mut command = Command::new(program);
        command.args(args).arg(rttscope_binary()?);
        Self::launch(command, yaml, (listen, admin), &ready, |_| {})
    }

    /// Like [`start`](Self::start), but inside network namespace `ns` of `link` (through
    /// `ip netns exec`, which execs rttscope in place: [`pid`](ListeningChild::pid) is
    /// rttscope's). It listens on 127.0.0.1:6033 with its admin API on 127.0.0.1:6070 *of that
    /// namespace*: only a thread inside it ([`WanLink::in_namespace`]) reaches them, and so
    /// does the readiness probe. The namespace is fresh, so the ports are free.
    pub fn start_in_namespace(link: &WanLink, ns: &str, yaml: &str) -> Result<ProxyProcess> {
        let listen = SocketAddr::from(([127, 0, 0, 1], 6033));
        let admin = SocketAddr::from(([127, 0, 0, 1], 6070));
        let ready = || link.in_namespace(ns, || TcpStream::connect(listen).is_ok()).unwrap_or(false);
        Self::launch(link.command(ns, &rttscope_binary()?.to_string_lossy()), yaml, (listen, admin), &ready, |_| {})
    }

    /// Runs `command` (the binary, possibly behind a prefix) with a config file and waits
    /// until `ready` says it accepts connections.
    fn launch(
        command: Command,
        yaml: &str,
        addrs: (SocketAddr, SocketAddr),
        ready: &dyn Fn() -> bool,
        configure: impl FnOnce(&mut Command),
    ) -> Result<ProxyProcess> {
        Self::launch_as(command, yaml, addrs, ready, configure, true)
    }

    /// [`launch`](Self::launch), writing `listen` into the config only if `write_listen`
    /// (else `yaml` has its own).
    fn launch_as(
        command: Command,
        yaml: &str,
        (listen, admin): (SocketAddr, SocketAddr),
        ready: &dyn Fn() -> bool,
        configure: impl FnOnce(&mut Command),
        write_listen: bool,
    ) -> Result<ProxyProcess> {
        let listen_line = if write_listen { format!("listen: {listen}\n") } else { String::new() };
        let yaml = format!("{listen_line}admin: {admin}\n{yaml}");
        Self::launch_config(command, &yaml, (listen, admin), ready, configure)
    }

    /// Writes `yaml` as the whole config file, runs `command` with it, and waits until
    /// `ready`.
    fn launch_config(
        mut command: Command,
        yaml: &str,
        (listen, admin): (SocketAddr, SocketAddr),
        ready: &dyn Fn() -> bool,
        configure: impl FnOnce(&mut Command),
    ) -> Result<ProxyProcess> {
        let dir = tempfile::Builder::new().prefix("rttscope-proc-").tempdir()?;
        let config = dir.path().join("rttscope.yaml");
        fs::write(&config, yaml)?;
        command
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", std::env::var("RTTSCOPE_TEST_LOG").unwrap_or_else(|_| "info".into()))
            .env("NO_COLOR", "1");
        configure(&mut command);
        let process = ListeningChild::spawn(command, listen, ready)?;
        Ok(ProxyProcess { process, admin, dir })
    }

    pub fn admin(&self) -> SocketAddr {
        self.admin
    }

    /// A scratch directory that lives as long as the process handle.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}
