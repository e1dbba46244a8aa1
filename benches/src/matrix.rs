//! The link matrix (`link-matrix`, `scripts/bench.sh --matrix`): the background story's
//! experiment matrix — buffer settings × network conditions — run over the test WAN
//! (20 ms, 100 Mbit/s) through rttscope, one cell at a time, with each cell's throughput,
//! base RTT, verdict and evidence from `/report`.
//!
//! Each cell starts a fresh [`Rig`] (WAN emulator link, a private MariaDB in its server
//! namespace, rttscope in its client one), applies the cell's sysctls before anything starts,
//! streams one result through rttscope with `mariadb --quick`, and takes the newest large
//! verdict. The cells and the table are plain data and text, tested without a network
//! (`tests/matrix.rs`); [`run_cell`] needs root and TUN.

use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rttscope_integration_tests::link_rig::{LARGE, Rig};
use rttscope_integration_tests::wan::{Chance, Impairments, WanImpairments, WanLink, WanStats};
use serde_json::Value;

/// The buffer settings: the story's three columns, at sizes where the TCP of this kernel
/// shows the effect (a 4 KiB receive buffer would make each cell minutes long).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffers {
    /// Nothing set: both kernels autotune.
    Autotuned,
    /// `tcp_wmem 4096 16384 16384` in the server's namespace.
    SendPinned,
    /// `tcp_rmem` max 32 KiB in rttscope's (the client's) namespace.
    ReceiveCapped,
}

impl Buffers {
    pub const ALL: [Buffers; 3] = [Buffers::Autotuned, Buffers::SendPinned, Buffers::ReceiveCapped];

    pub fn name(self) -> &'static str {
        match self {
            Buffers::Autotuned => "autotuned",
            Buffers::SendPinned => "server wmem 16K",
            Buffers::ReceiveCapped => "rttscope rmem 32K",
        }
    }

    /// Short name for `--only`.
    pub fn key(self) -> &'static str {
        match self {
            Buffers::Autotuned => "auto",
            Buffers::SendPinned => "wmem",
            Buffers::ReceiveCapped => "rmem",
        }
    }

    /// Sysctls of the server's namespace beyond the congestion control.
    pub fn server_sysctls(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Buffers::SendPinned => &[("net.ipv4.tcp_wmem", "4096 16384 16384")],
            _ => &[],
        }
    }

    /// Sysctls of rttscope's namespace.
    pub fn client_sysctls(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Buffers::ReceiveCapped => &[("net.ipv4.tcp_rmem", "4096 32768 32768")],
            _ => &[],
        }
    }
}

/// The network conditions: the story's rows that this emulator can make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    /// 20 ms, 100 Mbit/s, nothing else.
    Clean,
    /// 1 % of the server's packets lost.
    Loss,
    /// 1 % of the server's packets delivered twice.
    Duplication,
    /// 1 % of the server's packets held back 100 ms (correlation 10 %).
    Reordering,
    /// MariaDB pinned to CPU 0 with a busy loop pinned there too.
    BusyServer,
}

impl Condition {
    pub const ALL: [Condition; 5] =
        [Condition::Clean, Condition::Loss, Condition::Duplication, Condition::Reordering, Condition::BusyServer];

    pub fn name(self) -> &'static str {
        match self {
            Condition::Clean => "clean",
            Condition::Loss => "1 % loss",
            Condition::Duplication => "1 % duplication",
            Condition::Reordering => "1 % reordering (100 ms)",
            Condition::BusyServer => "server CPU busy",
        }
    }

    /// Short name for `--only`.
    pub fn key(self) -> &'static str {
        match self {
            Condition::Clean => "clean",
            Condition::Loss => "loss",
            Condition::Duplication => "dup",
            Condition::Reordering => "reorder",
            Condition::BusyServer => "cpu",
        }
    }

    /// What the line does, on the server's direction only (the result sets); seeded.
    pub fn impairments(self) -> WanImpairments {
        let down = match self {
            Condition::Loss => Impairments { loss: Chance::rate(0.01), ..Impairments::default() },
            Condition::Duplication => Impairments { duplicate: Chance::rate(0.01), ..Impairments::default() },
            Condition::Reordering => Impairments {
                reorder: Chance::correlated(0.01, 0.1),
                reorder_gap: Duration::from_millis(100),
                ..Impairments::default()
            },
            Condition::Clean | Condition::BusyServer => Impairments::default(),
        };
        WanImpairments { seed: 15, server_to_client: down, client_to_server: Impairments::default() }
    }
}

/// One cell of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub buffers: Buffers,
    pub condition: Condition,
}

impl Cell {
    /// `auto/loss`, `rmem/cpu`, …
    pub fn key(&self) -> String {
        format!("{}/{}", self.buffers.key(), self.condition.key())
    }
}

/// Every cell, buffers outer, conditions inner: the order they run and print in.
pub fn cells() -> Vec<Cell> {
    Buffers::ALL
        .iter()
        .flat_map(|&buffers| Condition::ALL.iter().map(move |&condition| Cell { buffers, condition }))
        .collect()
}

/// The cells `only` names (comma-separated keys; a key without `/` matches a whole row or
/// column, e.g. `loss` or `rmem`); all when `only` is empty.
pub fn select(only: &str) -> Result<Vec<Cell>, String> {
    let wanted: Vec<&str> = only.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if wanted.is_empty() {
        return Ok(cells());
    }
    let known = |w: &str| cells().iter().any(|c| c.key() == w || c.buffers.key() == w || c.condition.key() == w);
    if let Some(bad) = wanted.iter().find(|w| !known(w)) {
        let keys: Vec<String> = cells().iter().map(Cell::key).collect();
        return Err(format!("unknown cell {bad:?}; cells are {}", keys.join(", ")));
    }
    Ok(cells()
        .into_iter()
        .filter(|c| wanted.iter().any(|w| c.key() == *w || c.buffers.key() == *w || c.condition.key() == *w))
        .collect())
}

/// What one cell gave: a matrix cell's, or (with its own `C`) a confusion-matrix cell's.
#[derive(Clone, Debug)]
pub struct CellResult<C = Cell> {
    pub cell: C,
    /// The 1-minute load average when the cell started.
    pub load: f64,
    /// The client's time for the whole query, s.
    pub client_seconds: f64,
    /// The newest large verdict from `/report`'s `links`.
    pub verdict: Option<Value>,
    /// What the emulator did to the server's packets during the cell.
    pub line: String,
    /// Why the cell has no verdict.
    pub error: Option<String>,
}

/// `f`'s value, or what it panicked with (the rig panics on what it cannot do).
pub fn catching<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "panicked".into())
    })
}

/// How a matrix run is set up.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The query every cell streams.
    pub sql: String,
    /// The server's congestion control (`reno`: loss-based like the story's hosts).
    pub congestion_control: String,
    /// A cell whose client has not finished by then is stopped.
    pub cell_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings { sql: rows_sql(8_000), congestion_control: "reno".into(), cell_timeout: Duration::from_secs(120) }
    }
}

/// A result of `rows` rows of 1,000 bytes (about `rows` KB on the wire).
pub fn rows_sql(rows: u64) -> String {
    format!("SELECT REPEAT('x', 1000) FROM seq_1_to_{rows}")
}

/// The 1-minute load average, from /proc/loadavg.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Whether cells can run here (root, TUN, `ip`).
pub fn available() -> Result<(), String> {
    WanLink::available()
}

/// Runs one cell: a fresh link, server and rttscope; the query; the verdict. A failure
/// anywhere (the rig panics on what it cannot do) is the cell's `error`, not the run's end.
pub fn run_cell(cell: Cell, settings: &Settings) -> CellResult {
    let load = load_average().unwrap_or(f64::NAN);
    let (client_seconds, verdict, line, error) = match catching(|| run_cell_inner(cell, settings)) {
        Ok(Ok((seconds, verdict, line))) => (seconds, Some(verdict), line, None),
        Ok(Err((seconds, line, why))) => (seconds, None, line, Some(why)),
        Err(why) => (f64::NAN, None, String::new(), Some(why)),
    };
    CellResult { cell, load, client_seconds, verdict, line, error }
}

type CellOutcome = Result<(f64, Value, String), (f64, String, String)>;

fn run_cell_inner(cell: Cell, settings: &Settings) -> CellOutcome {
    let cc = [("net.ipv4.tcp_congestion_control", settings.congestion_control.as_str())];
    let server: Vec<(&str, &str)> = cc.iter().chain(cell.buffers.server_sysctls()).copied().collect();
    let rig = Rig::start_impaired(&server, cell.buffers.client_sysctls(), cell.condition.impairments()).ok_or((
        f64::NAN,
        String::new(),
        "the WAN emulator cannot run here".to_owned(),
    ))?;
    let busy = match cell.condition {
        Condition::BusyServer => Some(BusyServer::start(&rig).map_err(|e| (f64::NAN, String::new(), e))?),
        _ => None,
    };
    let started = Instant::now();
    let child = rig.stream(&settings.sql);
    let finished = wait_for(child, settings.cell_timeout);
    let seconds = started.elapsed().as_secs_f64();
    drop(busy);
    let line = describe_line(&rig.link.stats());
    finished.map_err(|why| (seconds, line.clone(), why))?;
    let verdict = rig.verdict(|v| v["bytes"].as_u64().unwrap_or(0) >= LARGE);
    Ok((seconds, verdict, line))
}

/// Waits for the client, killing it after `timeout`.
fn wait_for(mut child: Child, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
                }
                return Err(format!("mariadb failed ({status}): {}", err.trim()));
            }
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("the client had not finished after {} s", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for mariadb: {e}")),
        }
    }
}

/// The story's "server CPU = 100 %": every MariaDB thread pinned to CPU 0 and a busy loop
/// pinned there too, in the server's namespace. Stops the loop on drop.
struct BusyServer {
    spinner: Child,
}

impl BusyServer {
    fn start(rig: &Rig) -> Result<BusyServer, String> {
        let pid_file = rig
            .db
            .socket_path()
            .and_then(|s| s.parent())
            .map(|d| d.join("mysqld.pid"))
            .ok_or("the server is not a private one: no pid to pin")?;
        let pid =
            std::fs::read_to_string(&pid_file).map_err(|e| format!("{}: {e}", pid_file.display()))?.trim().to_owned();
        let pinned = Command::new("taskset")
            .args(["-a", "-p", "-c", "0", &pid])
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("taskset: {e}"))?;
        if !pinned.success() {
            return Err(format!("taskset -a -p -c 0 {pid}: {pinned}"));
        }
        let spinner = rig
            .link
            .command(rig.link.server_ns(), "taskset")
            .args(["-c", "0", "sh", "-c", "while :; do :; done"])
            .spawn()
            .map_err(|e| format!("busy loop: {e}"))?;
        Ok(BusyServer { spinner })
    }
}

impl Drop for BusyServer {
    fn drop(&mut self) {
        let _ = self.spinner.kill();
        let _ = self.spinner.wait();
    }
}

/// What the emulator did to the server's packets, in a few words.
pub fn describe_line(stats: &WanStats) -> String {
    let d = &stats.server_to_client;
    let mut parts = Vec::new();
    for (n, what) in
        [(d.lost, "lost"), (d.duplicated, "duplicated"), (d.reordered, "held back"), (d.dropped, "queue-dropped")]
    {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    if parts.is_empty() {
        format!("{} packets, none impaired", d.seen)
    } else {
        format!("{} of {} packets", parts.join(", "), d.seen)
    }
}

fn f(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn mbit(bytes_per_second: f64) -> f64 {
    bytes_per_second * 8.0 / 1e6
}

fn kb(bytes: f64) -> String {
    if bytes >= 1e6 { format!("{:.1} MB", bytes / 1e6) } else { format!("{:.0} KB", bytes / 1e3) }
}

/// The verdict's limit, with its secondary: `receive_window + loss`.
pub fn limit(v: &Value) -> String {
    let primary = v["limit"].as_str().unwrap_or("?");
    match v["secondary"].as_str() {
        Some(secondary) => format!("{primary} + {secondary}"),
        None => primary.to_owned(),
    }
}

/// The figures that decide a verdict, those that are there and not zero.
pub fn evidence(v: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(b) = f(v, "bytes_per_rtt") {
        parts.push(format!("{}/RTT", kb(b)));
    }
    // The round trip the transfer lived (the socket's smoothed RTT) beside the path's own.
    if let (Some(srtt), Some(base)) = (f(v, "rtt_us"), f(v, "base_rtt_us")) {
        parts.push(format!("RTT {:.1} ms (base {:.1})", srtt / 1e3, base / 1e3));
    }
    if let Some(w) = f(v, "advertised_window") {
        parts.push(format!("adv. window {}", kb(w)));
    }
    let l = &v["loss"];
    let stalls = f(l, "recovery_stalls").unwrap_or(0.0);
    if stalls > 0.0 {
        let rto = f(l, "rto_stalls").unwrap_or(0.0);
        let stall_ms = f(l, "recovery_stall_us").unwrap_or(0.0) / 1e3;
        parts.push(format!("{stalls:.0} stalls ({rto:.0} RTO, {stall_ms:.0} ms)"));
    }
    if let Some(timed) = f(l, "recoveries_timed").filter(|t| *t > 0.0) {
        parts.push(format!("{:.0} of {timed:.0} recoveries cut", f(l, "recoveries_cut").unwrap_or(0.0)));
    }
    let rate = f(l, "loss_rate").unwrap_or(0.0);
    if rate > 0.0 {
        parts.push(format!("loss {:.2} %", 100.0 * rate));
    }
    if let Some(bound) = f(l, "loss_limited_throughput") {
        parts.push(format!("Mathis {:.1} Mbit/s", mbit(bound)));
    }
    for (key, what) in
        [("out_of_order", "out of order"), ("duplicates", "duplicates"), ("retransmitted", "ours resent")]
    {
        let n = f(l, key).unwrap_or(0.0);
        if n > 0.0 {
            parts.push(format!("{n:.0} {what}"));
        }
    }
    let duration = f(v, "duration_us").unwrap_or(0.0).max(1.0);
    let pauses = f(v, "server_pauses").unwrap_or(0.0);
    if pauses > 0.0 {
        let share = 100.0 * f(v, "server_pause_us").unwrap_or(0.0) / duration;
        parts.push(format!("server paused {pauses:.0}× ({share:.0} %)"));
    }
    let held = f(v, "held_off_us").unwrap_or(0.0);
    if held > 0.0 {
        parts.push(format!("held off {:.0} %", 100.0 * held / duration));
    }
    // How fast the server went on sending while held, and the reader's pace while behind,
    // against the transfer's: figures of a hold-off long enough to time (a tenth or more).
    if held >= 0.1 * duration {
        if let Some(pace) = f(v, "pace_while_held") {
            let share = 100.0 * pace / f(v, "throughput").unwrap_or(0.0).max(1.0);
            parts.push(format!("{share:.0} % of its pace while held"));
        }
        if let Some(pace) = f(v, "reader_pace") {
            let share = 100.0 * f(v, "throughput").unwrap_or(0.0) / pace.max(1.0);
            parts.push(format!("at {share:.0} % of the reader's pace while behind"));
        }
    }
    if let Some(unread) = f(v, "client_unread_at_end").filter(|u| *u > 0.0) {
        let share = 100.0 * unread / f(v, "bytes").unwrap_or(0.0).max(1.0);
        parts.push(format!("unread at end {} ({share:.0} %)", kb(unread)));
    }
    // Bursts then silence: the share that tells a window (40 % and more) from the link.
    let idle = f(v, "idle_us").unwrap_or(0.0);
    if idle > 0.0 {
        parts.push(format!("idle {:.0} %", 100.0 * idle / duration));
    }
    // The share loss's rule reads: from the end of the sender's first recovery on.
    let after = f(v, "after_first_loss_us").unwrap_or(duration);
    if stalls > 0.0 && after < duration {
        let idle_after = f(v, "idle_after_first_loss_us").unwrap_or(0.0);
        parts.push(format!(
            "{:.0} % idle in the last {:.0} %",
            100.0 * idle_after / after.max(1.0),
            100.0 * after / duration
        ));
    }
    parts.join(", ")
}

/// The Markdown table, one row per cell, with the heading that says how it was made.
pub fn table(results: &[CellResult], command: &str, settings: &Settings) -> String {
    let mut out = String::new();
    let loads: Vec<f64> = results.iter().map(|r| r.load).filter(|l| l.is_finite()).collect();
    let (lo, hi) = loads.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &l| (lo.min(l), hi.max(l)));
    let _ = writeln!(out, "Link matrix: `{command}`");
    let _ = writeln!(
        out,
        "WAN emulator 20 ms, 100 Mbit/s; `{}` through rttscope ({} build) with `mariadb --quick`; server \
         congestion control {}; load average {}",
        settings.sql,
        if cfg!(debug_assertions) { "dev" } else { "release" },
        settings.congestion_control,
        if loads.is_empty() { "unknown".to_owned() } else { format!("{lo:.1} to {hi:.1}") }
    );
    out.push('\n');
    out.push_str("| buffers | condition | Mbit/s | base RTT | limit | evidence | the line | client | load |\n");
    out.push_str("|---|---|---:|---:|---|---|---|---:|---:|\n");
    for r in results {
        let (rate, rtt, lim, ev) = match (&r.verdict, &r.error) {
            (Some(v), _) => (
                f(v, "throughput").map_or("?".into(), |t| format!("{:.1}", mbit(t))),
                f(v, "base_rtt_us").map_or("?".into(), |t| format!("{:.1} ms", t / 1e3)),
                limit(v),
                evidence(v),
            ),
            (None, Some(why)) => ("—".into(), "—".into(), "(none)".into(), why.replace('|', "/").replace('\n', " ")),
            (None, None) => ("—".into(), "—".into(), "(none)".into(), String::new()),
        };
        let client = if r.client_seconds.is_finite() { format!("{:.1} s", r.client_seconds) } else { "—".into() };
        let _ = writeln!(
            out,
            "| {} | {} | {rate} | {rtt} | {lim} | {ev} | {} | {client} | {:.1} |",
            r.cell.buffers.name(),
            r.cell.condition.name(),
            r.line,
            r.load
        );
    }
    out
}
