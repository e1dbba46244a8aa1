//! A WAN emulator for tests: two network namespaces joined by a userspace delay line between
//! TUN devices, so real kernel TCP sees a real round-trip time, bottleneck and queue.
//!
//! ```text
//!  rtts-<pid>-<n>-srv                                              rtts-<pid>-<n>-cli
//!  10.250.<n>.1 wan0 ──TUN fd──▶ [read → shape → delay rtt/2 → write] ──TUN fd──▶ wan0 10.250.<n>.2
//!                   ◀──────────  [write ← delay rtt/2 ← shape ← read] ◀──────────
//! ```
//!
//! The kernel here has no `netem`, hence the delay line. Each direction has a reader thread
//! that stamps a packet the moment it is read and runs it through the bottleneck model
//! (`forward::Shaper`), and a writer thread that releases it at its due time (sleep, then
//! spin for the last 100 µs). The threads ask for SCHED_FIFO and carry on without it if
//! refused (`WanStats::realtime_threads` tells which).
//!
//! Optionally the line also loses, duplicates, corrupts and reorders packets, per direction,
//! from a seed ([`WanImpairments`], started with [`WanLink::start_impaired`]; see `impair.rs`
//! for the model and how it differs from netem). [`WanLink::stats`] counts what it did; the
//! kernels' side of the story is in [`tcp_info`] of a socket and [`WanLink::net_counters`] of
//! a namespace. [`WanLink::bulk_download`] moves a checked stream across the link and returns
//! both ends' `TCP_INFO`.
//!
//! Usage: `WanLink::available()` first (tests print `skipped: <why>` and return when it fails),
//! then `WanLink::start(config)`. Create sockets with [`WanLink::in_namespace`] (a listener in
//! [`WanLink::server_ns`], a client in [`WanLink::client_ns`]); they stay in their namespace
//! whichever thread or runtime uses them later (`tokio::net::TcpStream::from_std` works).
//! Run programs with [`WanLink::command`]. Dropping the link (also while unwinding from a panic)
//! stops the threads and deletes both namespaces; namespaces left by a killed run are removed
//! by the next `start` once their owner pid is gone.
//!
//! ```ignore
//! if let Err(why) = WanLink::available() {
//!     eprintln!("skipped: {why}");
//!     return;
//! }
//! let link = WanLink::start(WanConfig {
//!     rtt: Duration::from_millis(20),
//!     bandwidth_bps: Some(100_000_000),
//!     queue_bytes: 250_000,
//! })?;
//! link.set_sysctl(link.server_ns(), "net.ipv4.tcp_wmem", "4096 16384 16384")?;
//! let listener = link.in_namespace(link.server_ns(), || TcpListener::bind("0.0.0.0:0"))??;
//! let addr = (link.server_ip(), listener.local_addr()?.port());
//! let stream = link.in_namespace(link.client_ns(), || TcpStream::connect(addr))??;
//! let mysql = link.command(link.server_ns(), "mariadbd").args(["--port", "3306"]).spawn()?;
//!
//! // 1 % loss on the way to the client, reproducibly:
//! let lossy = Impairments { loss: Chance::rate(0.01), ..Impairments::default() };
//! let link = WanLink::start_impaired(
//!     WanConfig::with_rtt(Duration::from_millis(20)),
//!     WanImpairments { seed: 7, server_to_client: lossy, ..WanImpairments::default() },
//! )?;
//! // … a transfer …
//! let lost = link.stats().server_to_client.lost;
//! let csum_errors = link.net_counters(link.client_ns())?.get("Tcp.InCsumErrors");
//! ```

mod bridge;
mod forward;
mod impair;
mod kernel;
mod netns;
mod probe;
mod sys;

use std::io;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub use bridge::Bridge;
pub use forward::{DirectionStats, WanStats};
pub use impair::{Chance, Impairments, WanImpairments};
pub use kernel::{NetCounters, TcpInfo, tcp_info};
pub use probe::Transfer;

/// Name of the TUN device in each namespace.
const TUN_NAME: &str = "wan0";

/// Distinguishes the links of one process in namespace names and subnets.
static NEXT_LINK: AtomicU32 = AtomicU32::new(0);

/// The emulated link. The same settings apply in each direction. What goes wrong on it, which
/// may differ per direction, is in [`WanImpairments`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WanConfig {
    /// Round-trip time added by the link; each direction is delayed by half of it.
    pub rtt: Duration,
    /// Bottleneck rate in bits per second of IP packets (no link-layer overhead);
    /// `None` for no limit beyond the forwarder's own speed.
    pub bandwidth_bps: Option<u64>,
    /// Bytes the bottleneck queue holds before it tail-drops, like a router's buffer.
    /// Only meaningful with `bandwidth_bps`; one bandwidth-delay product is a classic size.
    pub queue_bytes: usize,
}

impl WanConfig {
    /// A link with `rtt` and no bandwidth limit.
    pub fn with_rtt(rtt: Duration) -> WanConfig {
        WanConfig { rtt, bandwidth_bps: None, queue_bytes: 0 }
    }

    /// The bandwidth-delay product in bytes (0 without a bandwidth limit).
    pub fn bdp_bytes(&self) -> usize {
        let bps = self.bandwidth_bps.unwrap_or(0) as u128;
        (bps * self.rtt.as_nanos() / 8 / 1_000_000_000) as usize
    }
}

/// A running emulated link between a server and a client namespace. Drop tears it down.
#[derive(Debug)]
pub struct WanLink {
    config: WanConfig,
    impairments: WanImpairments,
    server_ip: Ipv4Addr,
    client_ip: Ipv4Addr,
    // Field order is teardown order: the forwarder's threads stop and its TUN fds close
    // (an open TUN fd pins its namespace) before the namespaces are deleted.
    forwarder: forward::Forwarder,
    server: netns::Netns,
    client: netns::Netns,
}

impl WanLink {
    /// Whether this machine can run the emulator: root with CAP_NET_ADMIN and CAP_SYS_ADMIN,
    /// `/dev/net/tun` and the `ip` tool.
    /// `Err` says what is missing, for a test to print as `skipped: <why>`.
    pub fn available() -> Result<(), String> {
        if !sys::is_root() {
            return Err("the WAN emulator needs root (network namespaces, TUN)".into());
        }
        // Root in a container may lack these; then `ip netns add` would fail mid-test.
        for (bit, name) in [(CAP_NET_ADMIN, "CAP_NET_ADMIN"), (CAP_SYS_ADMIN, "CAP_SYS_ADMIN")] {
            if !has_capability(bit) {
                return Err(format!("the WAN emulator needs {name} (namespaces, TUN, mounts)"));
            }
        }
        if !std::path::Path::new("/dev/net/tun").exists() {
            return Err("/dev/net/tun is missing".into());
        }
        match Command::new("ip").arg("-V").output() {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(format!("`ip -V` failed: {}", out.status)),
            Err(e) => Err(format!("the `ip` tool (iproute2) is not runnable: {e}")),
        }
    }

    /// Creates the namespaces and TUN devices and starts forwarding, with no impairments.
    pub fn start(config: WanConfig) -> io::Result<WanLink> {
        WanLink::start_impaired(config, WanImpairments::default())
    }

    /// Like [`start`](Self::start), and the line also loses, duplicates, corrupts or reorders
    /// packets as `impairments` say. Rates outside [0, 1], correlations outside [0, 1) and
    /// reordering without a gap are `InvalidInput`.
    pub fn start_impaired(config: WanConfig, impairments: WanImpairments) -> io::Result<WanLink> {
        if config.bandwidth_bps == Some(0) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "bandwidth_bps must be > 0"));
        }
        impairments.validate().map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))?;
        for name in netns::cleanup_stale() {
            eprintln!("wan: removed stale namespace {name}");
        }
        let pid = std::process::id();
        let n = NEXT_LINK.fetch_add(1, Ordering::Relaxed);
        // Each link's addresses are visible only inside its own two namespaces, so links
        // sharing a subnet (after 256 of them) cannot collide.
        let octet = (n % 256) as u8;
        let server_ip = Ipv4Addr::new(10, 250, octet, 1);
        let client_ip = Ipv4Addr::new(10, 250, octet, 2);

        // Each `?` below drops what was built so far: Netns deletes itself, a TUN fd closes.
        let server = netns::Netns::create(format!("{}{pid}-{n}-srv", netns::PREFIX))?;
        let client = netns::Netns::create(format!("{}{pid}-{n}-cli", netns::PREFIX))?;
        let server_tun = tun_in(&server, server_ip, client_ip)?;
        let client_tun = tun_in(&client, client_ip, server_ip)?;
        let forwarder = forward::Forwarder::start(server_tun, client_tun, &config, &impairments, &format!("wan{n}"))?;
        Ok(WanLink { config, impairments, server_ip, client_ip, forwarder, server, client })
    }

    /// The link's settings.
    pub fn config(&self) -> WanConfig {
        self.config
    }

    /// What the link does wrong (the default, nothing, unless started with
    /// [`start_impaired`](Self::start_impaired)).
    pub fn impairments(&self) -> WanImpairments {
        self.impairments
    }

    /// Name of the server-side namespace (`rtts-<pid>-<n>-srv`).
    pub fn server_ns(&self) -> &str {
        self.server.name()
    }

    /// Name of the client-side namespace (`rtts-<pid>-<n>-cli`).
    pub fn client_ns(&self) -> &str {
        self.client.name()
    }

    /// The server side's address (10.250.<n>.1), reachable from the client namespace.
    pub fn server_ip(&self) -> Ipv4Addr {
        self.server_ip
    }

    /// The client side's address (10.250.<n>.2), reachable from the server namespace.
    pub fn client_ip(&self) -> Ipv4Addr {
        self.client_ip
    }

    /// A port on 127.0.0.1 of the caller's namespace whose connections are dialled to
    /// `target` from inside `ns`: how a client outside reaches rttscope run in a namespace.
    pub fn bridge(&self, ns: &str, target: std::net::SocketAddr) -> io::Result<Bridge> {
        Bridge::start(ns, target)
    }

    /// Blackholes the link (`true`): every packet either way is dropped, no RST, no ICMP —
    /// what a firewall that drops or a dead path looks like to both ends. `false` restores
    /// it. Dropped packets count as `lost`.
    pub fn set_cut(&self, cut: bool) {
        self.forwarder.set_cut(cut);
    }

    /// Packets seen, forwarded, dropped, released late and impaired, per direction, so far.
    pub fn stats(&self) -> WanStats {
        self.forwarder.stats()
    }

    /// Waits until no packet is on the line in either direction, at most `timeout`, and returns
    /// the counters then: after a transfer, so that what was held back or duplicated has
    /// arrived before they are compared with the kernels' counters.
    pub fn settled_stats(&self, timeout: Duration) -> WanStats {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let stats = self.stats();
            let idle = stats.server_to_client.in_flight() == 0 && stats.client_to_server.in_flight() == 0;
            if idle || std::time::Instant::now() >= deadline {
                return stats;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The TCP/IP counters of namespace `ns` (`nstat`'s source), e.g.
    /// `get("Tcp.InCsumErrors")` in the client namespace counts segments its kernel dropped for
    /// a bad checksum. Both namespaces are new, so every counter started at zero.
    pub fn net_counters(&self, ns: &str) -> io::Result<NetCounters> {
        netns::run_in(ns, NetCounters::read_own)?
    }

    /// Runs `f` on a thread inside namespace `ns` (any named namespace, usually
    /// [`server_ns`](Self::server_ns) or [`client_ns`](Self::client_ns)) and returns its
    /// result. Sockets created in `f` belong to `ns` for life.
    pub fn in_namespace<T: Send, F: FnOnce() -> T + Send>(&self, ns: &str, f: F) -> io::Result<T> {
        netns::run_in(ns, f)
    }

    /// Writes a sysctl inside namespace `ns`, e.g. `("net.ipv4.tcp_wmem", "4096 16384 16384")`.
    /// Only per-namespace keys (most of `net.*`) are confined to `ns`; writing a global key
    /// here would change the whole machine, so keys outside `net.` are refused.
    pub fn set_sysctl(&self, ns: &str, key: &str, value: &str) -> io::Result<()> {
        let path = sysctl_path(key)?;
        netns::run_in(ns, || std::fs::write(&path, value))?
    }

    /// Reads a sysctl inside namespace `ns` (trailing newline removed).
    pub fn sysctl(&self, ns: &str, key: &str) -> io::Result<String> {
        let path = sysctl_path(key)?;
        let value = netns::run_in(ns, || std::fs::read_to_string(&path))??;
        Ok(value.trim_end().to_owned())
    }

    /// A command that runs `program` inside namespace `ns`, built as
    /// `ip netns exec <ns> <program>` (no pre_exec hook, so no unsafe; `ip` also gives the
    /// child a `/sys` matching the namespace). Add arguments with `.arg()`. The caller owns
    /// and must wait for the child; a child still running when the link drops keeps its
    /// (now unnamed and disconnected) namespace alive until it exits.
    pub fn command(&self, ns: &str, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, program]);
        cmd
    }
}

/// Creates the TUN device in `ns`, addresses it point-to-point (`local` ↔ `peer`, one /30)
/// and brings it up. Returns the device's queue fd.
fn tun_in(ns: &netns::Netns, local: Ipv4Addr, peer: Ipv4Addr) -> io::Result<std::fs::File> {
    let name = ns.name();
    // IPv6 would send router solicitations and MLD reports over the link, noise in the
    // packet counts; new devices inherit `default`. Absent IPv6 is not an error.
    let _ = netns::run_in(name, || std::fs::write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1"));
    // The TUN device is created in the namespace of the thread that opens /dev/net/tun.
    let tun = netns::run_in(name, || sys::open_tun(TUN_NAME))??;
    let local = local.to_string();
    let peer = format!("{peer}/30");
    netns::ip(&["-n", name, "addr", "add", &local, "peer", &peer, "dev", TUN_NAME])?;
    netns::ip(&["-n", name, "link", "set", TUN_NAME, "mtu", "1500", "up"])?;
    Ok(tun)
}

const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;

/// Whether capability number `bit` is in this process's effective set (`CapEff` in
/// /proc/self/status). Unknown means no: the caller then skips rather than fails.
fn has_capability(bit: u32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << bit) != 0)
}

/// `net.ipv4.tcp_wmem` → `/proc/sys/net/ipv4/tcp_wmem`, for `net.*` keys only.
fn sysctl_path(key: &str) -> io::Result<std::path::PathBuf> {
    let valid = key.starts_with("net.") && !key.contains("..") && !key.contains('/');
    if !valid {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("sysctl {key:?}: only net.* keys are per-namespace"),
        ));
    }
    Ok(std::path::PathBuf::from("/proc/sys").join(key.replace('.', "/")))
}
