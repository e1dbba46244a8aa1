//! The rig the link tests share: a WAN emulator link (20 ms, 100 Mbit/s), a private MariaDB
//! in its server namespace, rttscope in its client one, and the clients and readings the
//! tests drive it with. Shared by the link tests (`tests/link_verdicts.rs`, `tests/link_loss.rs`)
//! and the link matrix benchmark (`rttscope-benches`' `link-matrix`).

use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::mariadb::{DB, NATIVE, NamespacedDb, TestDb};
use crate::process::ProxyProcess;
use crate::wan::{WanConfig, WanImpairments, WanLink};
use serde_json::Value;

pub const RTT: Duration = Duration::from_millis(20);
pub const LINK_BPS: u64 = 100_000_000;
/// The story's 22 MB result set, made by the server as fast as it can send it.
pub const BULK_SQL: &str = "SELECT REPEAT('x', 1000) FROM seq_1_to_22000";
/// Under a receive window of ~19 KB per round trip 22 MB would take 25 s; 4 MB shows the
/// same steady state in 4 s (the verdict depends on the shape of a transfer, not
/// its length, beyond `link.large_transfer`).
pub const SMALLER_SQL: &str = "SELECT REPEAT('x', 1000) FROM seq_1_to_4000";
/// Large responses carry at least this many bytes; smaller verdicts are not ours.
pub const LARGE: u64 = 3_000_000;

/// The line a rig runs over: its round trip, its bottleneck rate and what goes wrong on it.
#[derive(Clone, Copy, Debug)]
pub struct Line {
    pub rtt: Duration,
    pub bandwidth_bps: u64,
    pub impairments: WanImpairments,
}

/// The tests measure time on a 2-core machine: one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A link, a server at its far end and rttscope at its near end. Fields drop in order:
/// rttscope, then the server, then the namespaces.
pub struct Rig {
    pub proxy: ProxyProcess,
    pub db: NamespacedDb,
    pub link: WanLink,
}

impl Rig {
    /// Sysctls are written before the server and rttscope start, so every socket sees them.
    pub fn start(server_sysctls: &[(&str, &str)], client_sysctls: &[(&str, &str)]) -> Option<Rig> {
        Rig::start_impaired(server_sysctls, client_sysctls, WanImpairments::default())
    }

    /// Like [`start`](Self::start), over a line that also loses, duplicates or reorders.
    pub fn start_impaired(
        server_sysctls: &[(&str, &str)],
        client_sysctls: &[(&str, &str)],
        impairments: WanImpairments,
    ) -> Option<Rig> {
        Rig::start_configured(server_sysctls, client_sysctls, impairments, "")
    }

    /// Like [`start_impaired`](Self::start_impaired), with more of rttscope's YAML config.
    pub fn start_configured(
        server_sysctls: &[(&str, &str)],
        client_sysctls: &[(&str, &str)],
        impairments: WanImpairments,
        more_yaml: &str,
    ) -> Option<Rig> {
        Rig::start_over(RTT, server_sysctls, client_sysctls, impairments, more_yaml)
    }

    /// Like [`start_impaired`](Self::start_impaired), over a line whose round trip is `rtt`
    /// (a LAN's, say) instead of [`RTT`].
    pub fn start_impaired_at(rtt: Duration, impairments: WanImpairments) -> Option<Rig> {
        Rig::start_over(rtt, &[], &[], impairments, "")
    }

    fn start_over(
        rtt: Duration,
        server_sysctls: &[(&str, &str)],
        client_sysctls: &[(&str, &str)],
        impairments: WanImpairments,
        more_yaml: &str,
    ) -> Option<Rig> {
        let line = Line { rtt, bandwidth_bps: LINK_BPS, impairments };
        Rig::start_on(line, server_sysctls, client_sysctls, more_yaml)
    }

    /// A rig over `line` (any round trip and bottleneck rate, a one-BDP queue), with the
    /// namespaces' sysctls written before anything starts and more of rttscope's YAML config.
    pub fn start_on(
        line: Line,
        server_sysctls: &[(&str, &str)],
        client_sysctls: &[(&str, &str)],
        more_yaml: &str,
    ) -> Option<Rig> {
        if let Err(why) = WanLink::available() {
            crate::skip(why);
            return None;
        }
        let Line { rtt, bandwidth_bps, impairments } = line;
        let mut config = WanConfig { rtt, bandwidth_bps: Some(bandwidth_bps), queue_bytes: 0 };
        config.queue_bytes = config.bdp_bytes();
        let link = WanLink::start_impaired(config, impairments).expect("start WAN link");
        for (ns, sysctls) in [(link.server_ns(), server_sysctls), (link.client_ns(), client_sysctls)] {
            for (key, value) in sysctls {
                link.set_sysctl(ns, key, value).expect("set sysctl");
                eprintln!("{ns}: {key} = {:?}", link.sysctl(ns, key).expect("read back"));
            }
        }
        let db =
            TestDb::start_in_namespace(link.server_ns(), link.server_ip()).expect("MariaDB in the server namespace");
        let yaml = format!("upstream: {}\n{more_yaml}", db.upstream_addr());
        let proxy =
            ProxyProcess::start_in_namespace(&link, link.client_ns(), &yaml).expect("rttscope in the client namespace");
        Some(Rig { proxy, db, link })
    }

    /// `GET path` from the admin API, which only the client namespace can reach.
    pub fn admin(&self, path: &str) -> Value {
        serde_json::from_str(&self.admin_text(path)).expect("admin JSON")
    }

    /// The body of `GET path`, as it came.
    pub fn admin_text(&self, path: &str) -> String {
        let base = format!("http://{}", self.proxy.admin());
        self.link
            .in_namespace(self.link.client_ns(), || rttscope::cli::admin_client::get(&base, path))
            .expect("enter client ns")
            .unwrap_or_else(|e| panic!("{e}\n{}", self.proxy.log()))
    }

    /// The newest verdict that `pick` accepts, waiting for the collector to catch up.
    pub fn verdict(&self, pick: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let report = self.admin("/report");
            let links = report["links"].as_array().cloned().unwrap_or_default();
            if let Some(v) = links.iter().rev().find(|v| pick(v)) {
                return v.clone();
            }
            assert!(Instant::now() < deadline, "no such verdict in /report links: {links:#?}\n{}", self.proxy.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn large_verdict(&self) -> Value {
        self.verdict(|v| v["bytes"].as_u64().unwrap_or(0) >= LARGE)
    }

    /// `mariadb --quick` in the client namespace, through rttscope, output to /dev/null: a
    /// reader that takes rows as fast as they come (mysql_use_result, C). It runs at nice -10:
    /// on a machine busy with other work (a build beside the tests) a reader of the default
    /// priority fell behind the link, and rttscope rightly named the client the limit, which is
    /// not what the tests streaming with it provoke.
    pub fn stream(&self, sql: &str) -> Child {
        self.mariadb_at(sql, Some(-10)).stdout(Stdio::null()).spawn().expect("spawn mariadb")
    }

    /// Like [`stream`](Self::stream), with the rows on a pipe for the test to read.
    pub fn stream_to_pipe(&self, sql: &str) -> Child {
        self.mariadb(sql).stdout(Stdio::piped()).spawn().expect("spawn mariadb")
    }

    pub fn mariadb(&self, sql: &str) -> Command {
        self.mariadb_at(sql, None)
    }

    /// [`mariadb`](Self::mariadb) at niceness `nice`, if given.
    fn mariadb_at(&self, sql: &str, nice: Option<i32>) -> Command {
        let cli = self.db.mariadb_cli(self.proxy.listen(), NATIVE.user, NATIVE.password, Some(DB));
        let program = cli.get_program().to_string_lossy().into_owned();
        let mut cmd = match nice {
            Some(n) => {
                let mut cmd = self.link.command(self.link.client_ns(), "nice");
                cmd.args(["-n", &n.to_string(), &program]);
                cmd
            }
            None => self.link.command(self.link.client_ns(), &program),
        };
        cmd.args(cli.get_args()).args(["--quick", "--skip-column-names", "-e", sql]).stderr(Stdio::piped());
        cmd
    }

    /// Runs `f` with a mysql_async connection through rttscope, on a thread inside the client
    /// namespace with a runtime of its own (sockets belong to the creating thread's namespace).
    pub fn with_conn<T: Send, F, Fut>(&self, f: F) -> T
    where
        F: FnOnce(mysql_async::Conn) -> Fut + Send,
        Fut: Future<Output = T>,
    {
        let opts = self.db.opts_via(self.proxy.listen(), NATIVE.user, NATIVE.password);
        self.link
            .in_namespace(self.link.client_ns(), move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
                rt.block_on(
                    async move { f(mysql_async::Conn::new(opts).await.expect("connect through rttscope")).await },
                )
            })
            .expect("enter client ns")
    }
}

/// Waits for a `mariadb` child and checks it succeeded; returns how long it took from `since`.
pub fn finish(child: Child, since: Instant) -> Duration {
    let out = child.wait_with_output().expect("wait for mariadb");
    assert!(out.status.success(), "mariadb failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    since.elapsed()
}

pub fn mbit(bytes_per_second: f64) -> f64 {
    bytes_per_second * 8.0 / 1e6
}

pub fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("verdict without {key}: {v}"))
}

/// Prints the verdict whole, then the figures that decide it on one line.
pub fn show(what: &str, v: &Value) {
    eprintln!("{what}: verdict {}", serde_json::to_string_pretty(v).unwrap_or_default());
    let duration = num(v, "duration_us");
    let share = |key: &str| 100.0 * num(v, key) / duration.max(1.0);
    eprintln!(
        "{what}: limit {} | {:.1} Mbit/s ({:.2} MB in {:.2} s) | bytes/RTT {} | advertised window {} | rcvbuf {} | \
         idle {:.0}% | held off {:.0}% (window after {}, tail {} µs) | server pauses {} ({:.0}%) | rtt {} µs, base {} µs | {} samples",
        v["limit"],
        mbit(num(v, "throughput")),
        num(v, "bytes") / 1e6,
        duration / 1e6,
        v["bytes_per_rtt"],
        v["advertised_window"],
        v["receive_buffer"],
        share("idle_us"),
        share("held_off_us"),
        v["window_after_hold"],
        v["reader_tail_us"],
        v["server_pauses"],
        share("server_pause_us"),
        v["rtt_us"],
        v["base_rtt_us"],
        v["samples"],
    );
}
