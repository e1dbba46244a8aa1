//! Verdicts on the upstream link: which one limit held a transfer back,
//! the evidence, and the fix sized from the measured RTT and bandwidth.
//! Kept by the collector, bounded.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use super::sysctl::Sysctls;
use crate::report::fmt::{bytes, us};
use crate::report::LinkReport;

/// The limits, named as reports and metrics name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The path's bandwidth (the good case).
    Link,
    /// Our side's receive window.
    ReceiveWindow,
    /// The server sends at most a fixed window per RTT.
    Sender,
    /// The application behind rttscope reads too slowly.
    ClientReader,
    /// Small responses: round trips dominate.
    Latency,
    /// The server pauses with an empty pipe.
    Server,
}

impl Limit {
    pub const ALL: [Limit; 6] = [Limit::Link, Limit::ReceiveWindow, Limit::Sender, Limit::ClientReader, Limit::Latency, Limit::Server];

    pub fn name(self) -> &'static str {
        match self {
            Limit::Link => "link",
            Limit::ReceiveWindow => "receive_window",
            Limit::Sender => "sender",
            Limit::ClientReader => "client_reader",
            Limit::Latency => "latency",
            Limit::Server => "server",
        }
    }
}

/// What the relay measured about one transfer (or a run of small responses).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Measurement {
    pub limit: Limit,
    pub bytes: u64,
    pub duration_us: u64,
    /// Bytes per second.
    pub throughput: u64,
    pub rtt_us: u32,
    pub base_rtt_us: u32,
    /// Bytes delivered per round trip: the effective window.
    pub bytes_per_rtt: u64,
    /// Largest receive window we advertised.
    pub advertised_window: u64,
    pub receive_buffer: u64,
    pub idle_us: u64,
    /// Time rttscope stopped reading upstream because the client lagged.
    pub held_off_us: u64,
    pub server_pauses: u32,
    pub server_pause_us: u64,
    pub samples: u32,
    pub round_trips: u64,
}

/// A measurement with its connection, time and words.
#[derive(Clone, Debug, Serialize)]
pub struct LinkVerdict {
    pub conn_id: u64,
    pub at_us: u64,
    #[serde(flatten)]
    pub measurement: Measurement,
    /// Fastest delivery seen on this upstream, or the configured bandwidth.
    pub path_bytes_per_second: Option<u64>,
    pub bdp: Option<u64>,
    pub summary: String,
    pub fix: String,
}

/// Verdicts kept for the report.
const KEPT: usize = 100;

#[derive(Debug)]
pub struct Links {
    sysctls: Sysctls,
    expected_bytes_per_second: Option<u64>,
    fastest: u64,
    recent: VecDeque<LinkVerdict>,
    /// Transfers and their time, by limit, since start (metrics).
    pub totals: BTreeMap<&'static str, (u64, u64)>,
    /// Upstream RTT readings (µs), for the metrics histogram.
    pub rtt: crate::record::BucketHistogram,
}

fn mbps(bytes_per_second: u64) -> String {
    format!("{:.1} MB/s", bytes_per_second as f64 / 1e6)
}

impl Links {
    pub fn new(sysctls: Sysctls, expected_bps: Option<u64>) -> Links {
        Links {
            sysctls,
            expected_bytes_per_second: expected_bps.map(|b| b / 8),
            fastest: 0,
            recent: VecDeque::new(),
            totals: Limit::ALL.iter().map(|l| (l.name(), (0, 0))).collect(),
            rtt: crate::record::BucketHistogram::new(crate::record::SECONDS_BUCKETS),
        }
    }

    pub fn sysctls(&self) -> &Sysctls {
        &self.sysctls
    }

    /// Words and fix for a measurement; remembers it.
    pub fn add(&mut self, conn_id: u64, at_us: u64, m: Measurement) -> &LinkVerdict {
        if m.limit == Limit::Link {
            self.fastest = self.fastest.max(m.throughput);
        }
        let path = self.expected_bytes_per_second.or((self.fastest > 0).then_some(self.fastest));
        let rtt = u64::from(m.base_rtt_us.max(1));
        let bdp = path.map(|p| p * rtt / 1_000_000);
        let (summary, fix) = self.words(&m, path, bdp);
        let entry = self.totals.entry(m.limit.name()).or_default();
        entry.0 += 1;
        entry.1 += m.duration_us;
        if self.recent.len() >= KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(LinkVerdict { conn_id, at_us, measurement: m, path_bytes_per_second: path, bdp, summary, fix });
        self.recent.back().expect("just pushed")
    }

    fn words(&self, m: &Measurement, path: Option<u64>, bdp: Option<u64>) -> (String, String) {
        let rtt = us(u64::from(m.base_rtt_us));
        let moved = format!("{} in {} ({}) over a {rtt} RTT", bytes(m.bytes), us(m.duration_us), mbps(m.throughput));
        // Buffer sizes to recommend: twice the BDP, or 4 MiB when the path is unknown.
        let need = bdp.map_or(4 << 20, |b| (2 * b).max(64 << 10));
        let path_words = path.map(|p| format!(" on a path that delivered {}", mbps(p))).unwrap_or_default();
        match m.limit {
            Limit::Link => (
                format!("{moved}: the path's bandwidth is the limit; {} in flight per round trip", bytes(m.bytes_per_rtt)),
                "Nothing to tune at either end: move less data (fewer columns or rows, compression) or move closer.".to_owned(),
            ),
            Limit::ReceiveWindow => {
                let ceiling = self.sysctls.tcp_rmem.map(|[_, _, max]| format!(" (net.ipv4.tcp_rmem max here is {max})")).unwrap_or_default();
                (
                    format!(
                        "{moved}: rttscope's receive window capped it at {} per round trip (advertised at most {}){ceiling}",
                        bytes(m.bytes_per_rtt),
                        bytes(m.advertised_window)
                    ),
                    format!(
                        "Raise net.ipv4.tcp_rmem max (and net.core.rmem_max) on rttscope's host to at least {need} bytes (2 × the bandwidth-delay product), and leave relay.upstream_rcvbuf unset so autotuning can use it."
                    ),
                )
            }
            Limit::Sender => (
                format!(
                    "{moved}: the server sends at most {} per {rtt} RTT{path_words}, while rttscope advertised {}",
                    bytes(m.bytes_per_rtt),
                    bytes(m.advertised_window)
                ),
                format!(
                    "The server's send buffer is pinned: remove its SO_SNDBUF setting (or the driver/server option that sets it), or raise net.core.wmem_max and net.ipv4.tcp_wmem max on the server to at least {need} bytes (2 × the bandwidth-delay product)."
                ),
            ),
            Limit::ClientReader => (
                format!(
                    "{moved}: the application read slowly; rttscope's buffer was full and it stopped reading the server for {} ({:.0}% of the transfer), closing the server's window",
                    us(m.held_off_us),
                    100.0 * m.held_off_us as f64 / m.duration_us.max(1) as f64
                ),
                "Read results as they arrive (stream them) instead of processing row by row between reads, or give the application more CPU; nothing on the network will help.".to_owned(),
            ),
            Limit::Server => (
                format!("{moved}: the server paused {} times for {} in all with nothing in flight", m.server_pauses, us(m.server_pause_us)),
                "The server produces this result slowly: check the query plan, locks and I/O on the server; the link is idle meanwhile.".to_owned(),
            ),
            Limit::Latency => (
                format!(
                    "{} small round trips took {} at a {rtt} RTT: round trips, not bytes, are the cost",
                    m.round_trips,
                    us(m.duration_us)
                ),
                "Fewer round trips: batch statements, fetch related rows with JOINs or IN lists, move the database closer (see the findings for which statements).".to_owned(),
            ),
        }
    }

    /// The recent verdicts, newest last.
    pub fn report(&self) -> Vec<LinkReport> {
        self.recent
            .iter()
            .map(|v| {
                let mut detail = match serde_json::to_value(v) {
                    Ok(serde_json::Value::Object(map)) => map,
                    _ => serde_json::Map::new(),
                };
                let limit = detail.remove("limit").and_then(|l| l.as_str().map(str::to_owned)).unwrap_or_default();
                LinkReport { limit, detail }
            })
            .collect()
    }

    pub fn reset(&mut self) {
        self.recent.clear();
    }
}
