//! The plain config sections: `limits`, `relay`, `log`, `record`, `sql_view`, `metrics` and `link`.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Checker;
use crate::units::{Bandwidth, ByteSize, HumanDuration};

/// `limits`: how many clients, and how long to wait for what.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Most client connections open at once; a client beyond it gets MySQL's own
    /// "Too many connections" error (1040) at once. At least 1. Default `1024`.
    pub max_connections: u32,
    /// How long dialing the upstream server (and its greeting) may take before the client
    /// gets a MySQL error packet (1429, HY000) naming the upstream and the reason.
    /// Greater than 0. Default `5s`.
    pub connect_timeout: HumanDuration,
    /// Most connections in the connection phase at once: from the upstream dial to the end
    /// of the login. Each holds one server connection (and one of the server's
    /// `max_connections`) before its client has proven anything, so this bounds what
    /// clients that have not logged in can take from the server. A newcomer past it waits
    /// for a slot for up to `connect_timeout`, then gets 1040; while newcomers wait, a client
    /// that has kept rttscope waiting for 250 ms or more (for its answer to the greeting, its
    /// TLS handshake) gives its slot up. Effectively at most `max_connections`. At least 1.
    /// Default `64`: well below both rttscope's `max_connections` and the server's (151
    /// by default).
    pub max_connecting: u32,
    /// How long a client has to answer the server's greeting (its first packet: the
    /// handshake response or an SSLRequest). A MySQL client answers at once; a socket that
    /// says nothing holds a server connection meanwhile. Greater than 0; a longer one than
    /// `handshake_timeout` is cut to it. Default `2s`.
    pub first_byte_timeout: HumanDuration,
    /// How long each step of the connection phase may take once the server is reached
    /// and has greeted and the client has answered (`first_byte_timeout`): each TLS
    /// handshake, the client's response after TLS, the login exchange; a client still
    /// listening is told which step stalled. Greater than 0. Default `10s`.
    pub handshake_timeout: HumanDuration,
    /// Close a connection idle this long: no command in flight and no bytes either way (a
    /// long query is never idle). Both legs are closed, as the server itself does at its
    /// `wait_timeout`; the client's driver sees "server has gone away" on its next use and
    /// reconnects. `0` means never. Default `8h` (the server's own `wait_timeout`).
    pub idle_timeout: HumanDuration,
    /// End a command that has waited this long for its response: the client gets an ERR
    /// (1969, statement timeout) and the connection closes. `0` (the default) means never:
    /// servers have their own (`max_statement_time`, `max_execution_time`).
    pub query_timeout: HumanDuration,
    /// On SIGTERM/SIGINT, how long in-flight commands get to finish before their
    /// connections are closed. A second signal stops at once. Default `10s`.
    pub shutdown_grace: HumanDuration,
    /// Bytes all connections together may hold in emulated-link buffers beyond their
    /// fixed `relay.buffer_size` (a delay line holds what is in flight on the emulated
    /// pipe). Past it, a connection stops reading instead of growing: backpressure, never
    /// unbounded memory. At least `1MiB`. Default `256MiB`.
    pub buffer_budget: ByteSize,
    /// How often heap memory rttscope has freed is handed back to the system (glibc's
    /// `malloc_trim`): without it the allocator keeps what thousands of connections once
    /// used, and RSS creeps up towards the peak and stays there. Each trim takes
    /// milliseconds, off the forwarding threads. `0` means never (and it is a no-op on
    /// other C libraries), else at least `1s`. Default `30s`.
    pub heap_trim: HumanDuration,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_connections: 1024,
            connect_timeout: HumanDuration::from_secs(5),
            max_connecting: 64,
            first_byte_timeout: HumanDuration::from_secs(2),
            handshake_timeout: HumanDuration::from_secs(10),
            idle_timeout: HumanDuration::from_secs(8 * 3600),
            query_timeout: HumanDuration::from_secs(0),
            shutdown_grace: HumanDuration::from_secs(10),
            buffer_budget: ByteSize::mib(256),
            heap_trim: HumanDuration::from_secs(30),
        }
    }
}

impl LimitsConfig {
    /// How long a client has to answer the greeting: `first_byte_timeout`, never longer
    /// than `handshake_timeout` (a config that lowered only the latter keeps working).
    pub fn first_byte_limit(&self) -> std::time::Duration {
        self.first_byte_timeout.0.min(self.handshake_timeout.0)
    }

    /// The connection phase's slots: `max_connecting`, never more than `max_connections`.
    pub fn connecting_slots(&self) -> u32 {
        self.max_connecting.min(self.max_connections)
    }

    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        c.require(self.max_connections >= 1, "max_connections", "must be at least 1");
        c.require(!self.connect_timeout.is_zero(), "connect_timeout", "must be greater than 0");
        c.require(!self.handshake_timeout.is_zero(), "handshake_timeout", "must be greater than 0");
        c.require(self.max_connecting >= 1, "max_connecting", "must be at least 1");
        c.require(!self.first_byte_timeout.is_zero(), "first_byte_timeout", "must be greater than 0");
        c.require(self.buffer_budget >= ByteSize::mib(1), "buffer_budget", "must be at least 1MiB");
        c.require(
            self.heap_trim.is_zero() || self.heap_trim >= HumanDuration::from_secs(1),
            "heap_trim",
            format!("must be 0 (never) or at least 1s, not {}", self.heap_trim),
        );
    }
}

/// `relay`: how bytes are forwarded between client and upstream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RelayConfig {
    /// Bytes buffered per direction per connection; bounds memory whatever the result size.
    /// `4KiB` to `1MiB`. Default `32KiB`.
    pub buffer_size: ByteSize,
    /// TCP keepalive idle time on both legs' sockets, so a dead peer or path is noticed;
    /// `0` turns keepalive off. Default `60s`.
    pub keepalive: HumanDuration,
    /// `TCP_USER_TIMEOUT` on upstream sockets: how long sent data (or keepalive probes) may
    /// go unacknowledged before the long hop is declared dead, instead of the kernel's
    /// ~15 minutes of retries. `0` leaves the kernel's. Default `60s`.
    pub user_timeout: HumanDuration,
    /// `SO_SNDBUF` for upstream sockets. For experiments only: setting it disables the
    /// kernel's send-buffer autotuning, which is exactly what makes long, fast links slow
    /// (one buffer per round trip). Unset (the default) leaves autotuning on.
    pub upstream_sndbuf: Option<ByteSize>,
    /// `SO_RCVBUF` for upstream sockets. For experiments only: setting it disables the
    /// kernel's receive-window autotuning and caps the window. Unset (the default) leaves
    /// autotuning on.
    pub upstream_rcvbuf: Option<ByteSize>,
    /// The longest a connection thread with nothing to do keeps polling its sockets before
    /// it sleeps: a waking CPU is most of what a hop costs on a virtual machine. The window
    /// adapts to how long idle moments last, and polling stands aside while work waits for
    /// a CPU half the time or more. `0` sleeps at once; at most `1ms`. Default `100us`.
    pub idle_poll: HumanDuration,
    /// Run the connection threads under the kernel's `SCHED_BATCH` policy: a thread woken
    /// by its sockets does not preempt the task running on its CPU (often the client or the
    /// server that just woke it) but waits for that task's turn to end, and then finds more
    /// work at once. When every CPU is busy this saves context switches for the whole
    /// machine; with polling on (`idle_poll`), a lone client's latency does not move. Nice
    /// values are kept, and a thread started under another policy than the normal one
    /// (`chrt`, systemd's `CPUSchedulingPolicy=`) is left as the operator set it. While a
    /// link is emulated (`inject`) the threads run under the normal policy: the emulated
    /// link's timers must not wait for a busy CPU. `false` keeps the normal policy. Default
    /// `true`.
    pub sched_batch: bool,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            buffer_size: ByteSize::kib(32),
            keepalive: HumanDuration::from_secs(60),
            user_timeout: HumanDuration::from_secs(60),
            upstream_sndbuf: None,
            upstream_rcvbuf: None,
            idle_poll: HumanDuration::from_micros(100),
            sched_batch: true,
        }
    }
}

impl RelayConfig {
    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        c.require(
            (ByteSize::kib(4)..=ByteSize::mib(1)).contains(&self.buffer_size),
            "buffer_size",
            format!("must be between 4KiB and 1MiB, not {}", self.buffer_size),
        );
        c.require(
            self.idle_poll <= HumanDuration::from_millis(1),
            "idle_poll",
            format!("must be at most 1ms (0 turns polling off), not {}", self.idle_poll),
        );
        for (key, value) in [("upstream_sndbuf", self.upstream_sndbuf), ("upstream_rcvbuf", self.upstream_rcvbuf)] {
            c.require(value != Some(ByteSize(0)), key, "must be greater than 0 (leave it unset for kernel autotuning)");
        }
    }
}

/// Log line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = crate::ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(crate::ValueError::new("log format", s, "expected one of: text, json")),
        }
    }
}

/// `log`: what the proxy itself logs (to stderr).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// A tracing filter: a level (`off`, `error`, `warn`, `info`, `debug`, `trace`),
    /// optionally followed by `target=level` overrides, comma separated, e.g.
    /// `info,rttscope::relay=debug`. Default `info`.
    pub level: String,
    /// `text` or `json`. Default `text`.
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: "info".to_owned(), format: LogFormat::Text }
    }
}

const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Checks the subset of `EnvFilter` syntax we promise: `level` and `target=level` directives.
fn check_log_level(filter: &str) -> Result<(), String> {
    if filter.trim().is_empty() {
        return Err("must not be empty; use a level such as info".to_owned());
    }
    let is_level = |l: &str| LEVELS.iter().any(|x| x.eq_ignore_ascii_case(l.trim()));
    for directive in filter.split(',') {
        let ok = match directive.split_once('=') {
            None => is_level(directive),
            Some((target, level)) => {
                let target = target.trim();
                !target.is_empty()
                    && target.bytes().all(|b| b.is_ascii_alphanumeric() || b"_:-.".contains(&b))
                    && is_level(level)
            }
        };
        if !ok {
            return Err(format!(
                "invalid directive '{}' in '{filter}': expected a level ({}) or target=level",
                directive.trim(),
                LEVELS.join(", ")
            ));
        }
    }
    Ok(())
}

impl LogConfig {
    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        if let Err(message) = check_log_level(&self.level) {
            c.problem("level", message);
        }
    }
}

/// `record`: the per-command records and per-fingerprint aggregates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecordConfig {
    /// Record commands at all. With `false` rttscope is a plain relay (and link verdicts
    /// still work). Default `true`.
    pub enabled: bool,
    /// Distinct query fingerprints kept, by total time; the rest are folded into one entry
    /// named `other`. At least 10. Default `1000`.
    pub max_fingerprints: usize,
    /// Capacity of the bounded event queue between the relay and the recorder. When it is
    /// full, events are dropped and counted, never waited for. Allocated at start, 32 bytes
    /// an event (2 MiB at the default). The recorder empties it every 10 ms, and at low
    /// rates up to every 100 ms; a reader of the recording (a report, `/metrics`,
    /// `SHOW RTTSCOPE`) empties it first. At least 1024. Default `65536`.
    pub event_queue: usize,
    /// SQL text captured per command for fingerprinting; longer statements are cut here.
    /// `1KiB` to `16MiB`. Default `64KiB`.
    pub max_sql_bytes: ByteSize,
}

impl Default for RecordConfig {
    fn default() -> Self {
        RecordConfig { enabled: true, max_fingerprints: 1000, event_queue: 65536, max_sql_bytes: ByteSize::kib(64) }
    }
}

impl RecordConfig {
    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        c.require(self.max_fingerprints >= 10, "max_fingerprints", "must be at least 10");
        c.require(self.event_queue >= 1024, "event_queue", "must be at least 1024");
        c.require(
            (ByteSize::kib(1)..=ByteSize::mib(16)).contains(&self.max_sql_bytes),
            "max_sql_bytes",
            format!("must be between 1KiB and 16MiB, not {}", self.max_sql_bytes),
        );
    }
}

/// `sql_view`: statements rttscope answers itself at the SQL prompt, never forwarded
/// (`SHOW RTTSCOPE STATEMENTS|FINDINGS|LINK|INJECT`, `SET RTTSCOPE key = value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SqlViewConfig {
    /// Answer `SHOW RTTSCOPE ...` for every client. They show statement shapes (never
    /// literals) and link verdicts of all connections to anyone who can log in through
    /// rttscope; turn off on a proxy shared by parties who must not see each other's.
    /// Default `true`.
    pub enabled: bool,
    /// Let `SET RTTSCOPE ...` change the emulated link, as `PUT /inject` does, for all
    /// connections. Default `false`: the admin API alone changes it.
    pub allow_set: bool,
}

impl Default for SqlViewConfig {
    fn default() -> Self {
        SqlViewConfig { enabled: true, allow_set: false }
    }
}

/// `metrics`: what `/metrics` exposes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Statements (by total time) that get per-statement series of their own; the rest
    /// count in one `other` series, so each per-statement family has at most this many plus
    /// one series. 0 to 10000. Default `100`.
    pub top_statements: usize,
    /// OpenTelemetry's `service.name`: the `service` label every series carries, so that a
    /// fleet's sidecars can be told apart. Unset (the default): the `OTEL_SERVICE_NAME`
    /// environment variable, else the `program_name` the first client's connection attributes
    /// give, else `unknown_service`. At most 255 characters, none of them control characters.
    pub service: Option<String>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig { top_statements: 100, service: None }
    }
}

impl MetricsConfig {
    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        c.require(
            self.top_statements <= 10_000,
            "top_statements",
            format!("must be at most 10000 (each is a series per family), not {}", self.top_statements),
        );
        if let Some(service) = &self.service {
            c.require(
                !service.is_empty() && service.chars().count() <= 255 && !service.chars().any(char::is_control),
                "service",
                format!("must be 1 to 255 characters without control characters, not {service:?}"),
            );
        }
    }
}

/// `link`: watching the upstream TCP connection (TCP_INFO) and judging what limits it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// A response at least this large counts as a large transfer, for which rttscope says
    /// what limited its speed (window, sender, reader, link). Greater than 0. Default `1MiB`.
    pub large_transfer: ByteSize,
    /// How often TCP_INFO is sampled on a connection while data flows. Greater than 0.
    /// Default `10ms`.
    pub sample_interval: HumanDuration,
    /// The round-trip time you expect to the server; when set, verdicts compare the
    /// measured RTT with it. Unset (the default): no expectation.
    pub expected_rtt: Option<HumanDuration>,
    /// The bandwidth you expect to the server; when set, transfers far below it are
    /// explained. Unset (the default): no expectation.
    pub expected_bandwidth: Option<Bandwidth>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            large_transfer: ByteSize::mib(1),
            sample_interval: HumanDuration::from_millis(10),
            expected_rtt: None,
            expected_bandwidth: None,
        }
    }
}

impl LinkConfig {
    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        c.require(self.large_transfer.0 > 0, "large_transfer", "must be greater than 0");
        c.require(!self.sample_interval.is_zero(), "sample_interval", "must be greater than 0");
        c.require(self.expected_rtt.is_none_or(|d| !d.is_zero()), "expected_rtt", "must be greater than 0 when set");
    }
}

#[cfg(test)]
mod tests {
    use super::check_log_level;

    #[test]
    fn log_levels() {
        for good in ["info", "DEBUG", "info,rttscope::relay=debug", "warn, h2=off"] {
            assert!(check_log_level(good).is_ok(), "{good}");
        }
        for bad in ["", "verbose", "info,", "=debug", "rttscope::relay", "a=b", "x[span]=info"] {
            assert!(check_log_level(bad).is_err(), "{bad}");
        }
    }
}
