//! `findings`: thresholds of the query-pattern detectors and the what-if scenarios.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::error::Checker;
use crate::units::{Bandwidth, ByteSize, HumanDuration, Percent};

/// `findings`: when a pattern is worth reporting, and which links to project costs onto.
///
/// Each detector reports only when its projected cost at `reference_rtt` (round trips the
/// pattern spends, times that RTT) reaches its `min_projected_cost`, so cheap patterns on a
/// fast link do not drown the expensive ones.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FindingsConfig {
    /// The RTT costs are projected at when deciding whether a finding matters (typically
    /// the link you are moving to). Greater than 0. Default `15ms`.
    pub reference_rtt: HumanDuration,
    /// `n_plus_one`: the same small query repeated in a loop.
    pub n_plus_one: NPlusOneConfig,
    /// `repeated_write`: the same INSERT/UPDATE/DELETE repeated one row at a time.
    pub repeated_write: RepeatedWriteConfig,
    /// `undersized_fetch`: a cursor fetched in batches too small for the result.
    pub fetch: FetchConfig,
    /// `pagination_loop`: the same query paged through with LIMIT/OFFSET.
    pub pagination: PaginationConfig,
    /// `chatty_session`: a session of many tiny round trips.
    pub chatty: ChattyConfig,
    /// `connection_churn`: connections opened so often that setting them up is a large
    /// share of an application's time.
    pub connection_churn: ConnectionChurnConfig,
    /// `compression`: a statement whose transfer is bandwidth-bound and whose results
    /// compress well, while the long hop is not compressed.
    pub compression: CompressionConfig,
    /// Links to show "what this would cost there" for, in every finding and in the report.
    /// Default: same rack (200us, 10gbit), another data centre (15ms, 34mbit), another region
    /// (80ms, 20mbit): every one with a bandwidth, slower the farther, so a large result costs
    /// more the farther it goes.
    pub scenarios: Vec<Scenario>,
}

impl Default for FindingsConfig {
    fn default() -> Self {
        FindingsConfig {
            reference_rtt: HumanDuration::from_millis(15),
            n_plus_one: NPlusOneConfig::default(),
            repeated_write: RepeatedWriteConfig::default(),
            fetch: FetchConfig::default(),
            pagination: PaginationConfig::default(),
            chatty: ChattyConfig::default(),
            connection_churn: ConnectionChurnConfig::default(),
            compression: CompressionConfig::default(),
            scenarios: Scenario::defaults(),
        }
    }
}

/// `findings.n_plus_one`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NPlusOneConfig {
    /// Fewest back-to-back executions of one fingerprint that count as a loop over the rows
    /// of a parent query (whose result held the values the loop used). At least 2.
    /// Default `5`.
    pub min_repeats: u32,
    /// Fewest back-to-back executions that count as a loop when no parent query is found:
    /// fewer is how many workloads simply do a handful of lookups per transaction. At least
    /// `min_repeats`. Default `20`.
    pub min_repeats_without_parent: u32,
    /// Largest gap between the end of one execution and the start of the next for them to
    /// belong to the same loop. Greater than 0. Default `100ms`.
    pub max_gap: HumanDuration,
    /// Most other statements between two executions of one loop (a loop body may run a few
    /// lookups per row). A transaction's start or end always separates loops. Default `4`.
    pub max_between: u32,
    /// Executions returning more rows than this are not the "one" of N+1. Default `10`.
    pub max_rows: u64,
    /// Report only when the loop would cost at least this at `reference_rtt`.
    /// Default `50ms`.
    pub min_projected_cost: HumanDuration,
}

impl Default for NPlusOneConfig {
    fn default() -> Self {
        NPlusOneConfig {
            min_repeats: 5,
            min_repeats_without_parent: 20,
            max_gap: HumanDuration::from_millis(100),
            max_between: 4,
            max_rows: 10,
            min_projected_cost: HumanDuration::from_millis(50),
        }
    }
}

/// `findings.repeated_write`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepeatedWriteConfig {
    /// Fewest back-to-back executions of one write fingerprint that count, when a parent's
    /// rows, one trace, one sqlcommenter origin or one explicit transaction shows they were one
    /// loop; a run shown only by its regular pace needs `n_plus_one.min_repeats_without_parent`
    /// (random streaks of a few come by chance). At least 2. Default `5`.
    pub min_repeats: u32,
    /// Largest gap between consecutive executions of the run. Greater than 0.
    /// Default `100ms`.
    pub max_gap: HumanDuration,
    /// Most other statements between two executions of the run. A transaction's start or
    /// end always separates runs. Default `4`.
    pub max_between: u32,
    /// Report only when the run would cost at least this at `reference_rtt`.
    /// Default `50ms`.
    pub min_projected_cost: HumanDuration,
}

impl Default for RepeatedWriteConfig {
    fn default() -> Self {
        RepeatedWriteConfig {
            min_repeats: 5,
            max_gap: HumanDuration::from_millis(100),
            max_between: 4,
            min_projected_cost: HumanDuration::from_millis(50),
        }
    }
}

/// `findings.fetch`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FetchConfig {
    /// The fetch size (rows per `COM_STMT_FETCH` the client asks for) below which a cursor's
    /// batches are undersized: a cursor fetching fewer rows than this per round trip is a
    /// finding once it made `min_fetches` fetches, however large its result. At least 1.
    /// Default `100`.
    pub min_rows: u64,
    /// Fewest fetch round trips for one result that count as undersized batches. At
    /// least 2. Default `5`.
    pub min_fetches: u32,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig { min_rows: 100, min_fetches: 5 }
    }
}

/// `findings.pagination`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PaginationConfig {
    /// Fewest consecutive pages of one query that count as a loop. At least 2.
    /// Default `5`.
    pub min_pages: u32,
}

impl Default for PaginationConfig {
    fn default() -> Self {
        PaginationConfig { min_pages: 5 }
    }
}

/// `findings.chatty`: round trips that do no work on data (pings, `SET`, `SELECT 1`, `SHOW`,
/// `USE`), dense in time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChattyConfig {
    /// Fewest such round trips within `window` on one connection that count. At least 1.
    /// Default `100`.
    pub min_round_trips: u32,
    /// The sliding window they must fall within. Greater than 0. Default `10s`.
    pub window: HumanDuration,
    /// A round trip moving at most this many bytes (both ways) counts as small.
    /// Default `1KiB`.
    pub max_bytes: ByteSize,
    /// Report only when the session's small round trips would cost at least this at
    /// `reference_rtt`. Default `500ms`.
    pub min_projected_cost: HumanDuration,
}

impl Default for ChattyConfig {
    fn default() -> Self {
        ChattyConfig {
            min_round_trips: 100,
            window: HumanDuration::from_secs(10),
            max_bytes: ByteSize::kib(1),
            min_projected_cost: HumanDuration::from_millis(500),
        }
    }
}

/// `findings.connection_churn`: an application that connects per request, so connection
/// setup (TCP connect, greeting, auth exchange, TLS) takes a large share of its time.
/// Judged per application (`user@client-host` and client library) over the recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionChurnConfig {
    /// Fewest connections the application must have opened. At least 2. Default `20`.
    pub min_connections: u32,
    /// Least share of the application's time in commands (setups included) that went to
    /// setting up connections. Default `25%`.
    pub min_share: Percent,
}

impl Default for ConnectionChurnConfig {
    fn default() -> Self {
        ConnectionChurnConfig { min_connections: 20, min_share: Percent::constant(25.0) }
    }
}

/// `findings.compression`: when to suggest compressing the long hop for a statement. Its
/// results' compressibility is measured on samples (zlib) while the long hop is plain; its
/// transfer is bandwidth-bound when, at a scenario's bandwidth (or the emulated link's), its
/// bytes take at least `min_transfer_share` of its projected time there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompressionConfig {
    /// Least measured ratio of sampled to compressed bytes. At least 1. Default `2.0` (2:1).
    pub min_ratio: f64,
    /// Least share of the statement's projected time its transfer takes. Default `50%`.
    pub min_transfer_share: Percent,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig { min_ratio: 2.0, min_transfer_share: Percent::constant(50.0) }
    }
}

/// A link to project costs onto: "at this RTT (and bandwidth), this would take ...".
/// `name` and `rtt` are required; there is no sensible default for either.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Label shown in reports, e.g. `another region`. Non-empty and unique.
    pub name: String,
    /// Round-trip time of that link.
    pub rtt: HumanDuration,
    /// Bandwidth of that link, if it matters (large results); unset: unlimited.
    #[serde(default)]
    pub bandwidth: Option<Bandwidth>,
}

impl Scenario {
    fn defaults() -> Vec<Scenario> {
        let mbit = |n: u64| Bandwidth::new(n * 1_000_000);
        vec![
            Scenario {
                name: "same rack".to_owned(),
                rtt: HumanDuration(std::time::Duration::from_micros(200)),
                bandwidth: mbit(10_000),
            },
            Scenario {
                name: "another data centre".to_owned(),
                rtt: HumanDuration::from_millis(15),
                bandwidth: mbit(34),
            },
            Scenario { name: "another region".to_owned(), rtt: HumanDuration::from_millis(80), bandwidth: mbit(20) },
        ]
    }
}

impl FindingsConfig {
    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        let positive = "must be greater than 0";
        c.require(!self.reference_rtt.is_zero(), "reference_rtt", positive);

        let n = &self.n_plus_one;
        let mut s = c.at("n_plus_one");
        s.require(n.min_repeats >= 2, "min_repeats", "must be at least 2");
        s.require(
            n.min_repeats_without_parent >= n.min_repeats,
            "min_repeats_without_parent",
            "must be at least min_repeats",
        );
        s.require(!n.max_gap.is_zero(), "max_gap", positive);

        let w = &self.repeated_write;
        let mut s = c.at("repeated_write");
        s.require(w.min_repeats >= 2, "min_repeats", "must be at least 2");
        s.require(!w.max_gap.is_zero(), "max_gap", positive);

        let mut s = c.at("fetch");
        s.require(self.fetch.min_rows >= 1, "min_rows", "must be at least 1");
        s.require(self.fetch.min_fetches >= 2, "min_fetches", "must be at least 2");

        c.at("pagination").require(self.pagination.min_pages >= 2, "min_pages", "must be at least 2");
        let mut s = c.at("chatty");
        s.require(self.chatty.min_round_trips >= 1, "min_round_trips", "must be at least 1");
        s.require(!self.chatty.window.is_zero(), "window", positive);
        let churn = &self.connection_churn;
        let mut s = c.at("connection_churn");
        s.require(churn.min_connections >= 2, "min_connections", "must be at least 2");
        let ratio = self.compression.min_ratio;
        c.at("compression").require(ratio.is_finite() && ratio >= 1.0, "min_ratio", "must be a number of at least 1");

        let mut seen = HashSet::new();
        for (i, scenario) in self.scenarios.iter().enumerate() {
            let mut s = c.at(&format!("scenarios[{i}]"));
            let name = scenario.name.trim();
            if name.is_empty() {
                s.problem("name", "must not be empty");
            } else if !seen.insert(name) {
                s.problem("name", format!("'{name}' is used by an earlier scenario"));
            }
        }
    }
}
