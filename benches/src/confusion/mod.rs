//! The link-verdict confusion matrix (`link-confusion`, `scripts/bench.sh --confusion`): six
//! causes injected one at a time over the WAN emulator — a clamped server send buffer, a
//! clamped receive buffer, random loss, a capped link rate, a slow server, a slow client
//! reader — × RTT {5, 20, 80 ms} × result size {1, 10, 40 MiB}, each cell on a fresh
//! [`Rig`](rttscope_integration_tests::link_rig::Rig), and the verdict rttscope gave it
//! against the cause that was injected. Misses stay misses; a cell without a verdict is
//! `unknown`.
//!
//! Each cause is sized so that it, and not the line, sets the pace, and so that every cell
//! ends in bounded time (the sizes are in [`Cause::setup`]): the buffer clamps scale with the
//! RTT to hold the sender to about a quarter of the 100 Mbit/s line at every RTT (a fixed
//! 16 KiB at 80 ms would carry 200 KB/s); the loss rate falls as the RTT grows, keeping the
//! Mathis bound of a Reno sender between 3 and 28 Mbit/s (1 % at 5 ms would take 40 MiB over
//! 80 ms about six minutes); the server sends its result in six chunks and sleeps after each
//! longer than the chunk takes to send ([`slow_server_sql`]); the slow reader's side may buffer
//! 64 KiB in rttscope's socket to it (`tcp_wmem` in the client's namespace).
//!
//! - [`run`]: one cell, start to end;
//! - [`table`]: the confusion matrix, precision and recall per class, the Markdown.

pub mod run;
pub mod table;

use std::time::Duration;

use rttscope_integration_tests::wan::{Chance, Impairments, WanImpairments};

/// The line every cause but the rate cap runs over, bits per second.
pub const LINE_BPS: u64 = 100_000_000;
/// The capped line of [`Cause::LinkRate`], bits per second.
pub const CAPPED_BPS: u64 = 30_000_000;
/// The slow reader's pace, timed from its first byte: a quarter of the line, as the clamps
/// are a quarter of its bandwidth-delay product.
pub const READER_BYTES_PER_SECOND: f64 = LINE_BPS as f64 / 8.0 / 4.0;
/// Characters in a result row (the wire adds a few bytes of header to each).
const ROW_BYTES: u64 = 1_000;

/// What a cell injects: the one cause that should hold its transfer back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    /// The server's `tcp_wmem` clamped to a quarter of the path's bandwidth-delay product.
    SendBuffer,
    /// rttscope's `tcp_rmem` clamped so that its window carries about a quarter of the line.
    ReceiveWindow,
    /// Random loss on the server's direction, for a Reno (loss-based) server.
    RandomLoss,
    /// The line itself capped at 30 Mbit/s, nothing else wrong.
    LinkRate,
    /// The server sleeps between chunks of rows: `IF(seq % k = 0, SLEEP(s), 0)`.
    SlowServer,
    /// The application reads the result at a quarter of the line (3.1 MB/s), rttscope's socket
    /// to it buffering 64 KiB.
    SlowClient,
}

impl Cause {
    pub const ALL: [Cause; 6] = [
        Cause::SendBuffer,
        Cause::ReceiveWindow,
        Cause::RandomLoss,
        Cause::LinkRate,
        Cause::SlowServer,
        Cause::SlowClient,
    ];

    /// Short name, for `--only` and the table.
    pub fn key(self) -> &'static str {
        match self {
            Cause::SendBuffer => "sndbuf",
            Cause::ReceiveWindow => "rcvbuf",
            Cause::RandomLoss => "loss",
            Cause::LinkRate => "rate",
            Cause::SlowServer => "server",
            Cause::SlowClient => "reader",
        }
    }

    /// The verdict (`links[].limit`) that names this cause.
    pub fn expected(self) -> &'static str {
        match self {
            Cause::SendBuffer => "sender",
            Cause::ReceiveWindow => "receive_window",
            Cause::RandomLoss => "loss",
            Cause::LinkRate => "link",
            Cause::SlowServer => "server",
            Cause::SlowClient => "client_reader",
        }
    }

    /// How the cell is set up at round trip `rtt_ms` for a result of `mib` MiB.
    pub fn setup(self, rtt_ms: u64, mib: u64) -> Setup {
        let rows = rows_for(mib);
        let mut setup = Setup {
            bandwidth_bps: LINE_BPS,
            server_sysctls: vec![("net.ipv4.tcp_congestion_control".into(), "reno".into())],
            client_sysctls: Vec::new(),
            down: Impairments::default(),
            sql: format!("SELECT REPEAT('x', 1000) FROM seq_1_to_{rows}"),
            slow_reader: false,
        };
        // A quarter of the line's BDP: 16 KiB at 5 ms, 64 at 20, 256 at 80.
        let quarter_bdp = 16 * 1024 * rtt_ms / 5;
        match self {
            Cause::SendBuffer => {
                setup.server_sysctls.push(("net.ipv4.tcp_wmem".into(), format!("4096 {quarter_bdp} {quarter_bdp}")))
            }
            // The kernel advertises about 60 % of the buffer as window (tcp_adv_win_scale):
            // twice a quarter BDP leaves about a third of the line.
            Cause::ReceiveWindow => setup
                .client_sysctls
                .push(("net.ipv4.tcp_rmem".into(), format!("4096 {} {}", 2 * quarter_bdp, 2 * quarter_bdp))),
            Cause::RandomLoss => setup.down.loss = Chance::rate(loss_rate(rtt_ms)),
            Cause::LinkRate => setup.bandwidth_bps = CAPPED_BPS,
            Cause::SlowServer => setup.sql = slow_server_sql(rtt_ms, rows),
            // rttscope's socket to its client may buffer 64 KiB: without a clamp the loopback
            // sockets take in several MB, and a result that fits in them leaves the server at
            // the path's pace whatever the reader does later — then the reader is named from
            // what it left unread (`link_verdicts` tests that); these cells test the pace.
            Cause::SlowClient => {
                setup.slow_reader = true;
                setup.client_sysctls.push(("net.ipv4.tcp_wmem".into(), "4096 16384 65536".into()));
            }
        }
        setup
    }
}

/// A cell's line, namespaces, query and reader.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    pub bandwidth_bps: u64,
    pub server_sysctls: Vec<(String, String)>,
    pub client_sysctls: Vec<(String, String)>,
    /// What the line does to the server's packets (the client's are left alone).
    pub down: Impairments,
    pub sql: String,
    /// The client reads at [`READER_BYTES_PER_SECOND`] instead of as fast as rows come.
    pub slow_reader: bool,
}

impl Setup {
    /// The emulator's impairments: `down` on the server's direction, seeded.
    pub fn impairments(&self) -> WanImpairments {
        WanImpairments { seed: 15, server_to_client: self.down, client_to_server: Impairments::default() }
    }
}

/// Rows of 1,000 characters that make at least `mib` MiB.
pub fn rows_for(mib: u64) -> u64 {
    (mib << 20).div_ceil(ROW_BYTES)
}

/// Random loss at round trip `rtt_ms`: 1 % at 5 ms, 0.5 % at 20, 0.3 % at 80 (Mathis bounds
/// for 1448-byte segments of 28, 10 and 3.2 Mbit/s; 40 MiB in at most about 100 s).
pub fn loss_rate(rtt_ms: u64) -> f64 {
    match rtt_ms {
        0..=9 => 0.01,
        10..=39 => 0.005,
        _ => 0.003,
    }
}

/// Chunks a slow server's result comes in, a sleep after each.
const SLOW_SERVER_CHUNKS: u64 = 6;

/// A result of `rows` rows that the server sends in [`SLOW_SERVER_CHUNKS`] chunks, sleeping
/// after each five round trips (at least 50 ms) plus twice what the chunk takes to send (its
/// time at the line's rate and a slow start's round trips from ten segments: the connection
/// idled past its RTO, so the window starts again). A sleep shorter than that is no pause on
/// the wire: the server's socket buffer holds the chunk, and sends it while the query sleeps.
pub fn slow_server_sql(rtt_ms: u64, rows: u64) -> String {
    let every = (rows / SLOW_SERVER_CHUNKS).max(1);
    let chunk_bytes = every * ROW_BYTES;
    let slow_start_rtts = (chunk_bytes as f64 / 14_480.0).log2().ceil().max(1.0) as u64;
    let send_ms = chunk_bytes * 8 * 1_000 / LINE_BPS + rtt_ms * slow_start_rtts;
    let sleep_ms = (5 * rtt_ms).max(50) + 2 * send_ms;
    format!(
        "SELECT REPEAT('x', 1000), IF(seq % {every} = 0, SLEEP({:.3}), 0) FROM seq_1_to_{rows}",
        sleep_ms as f64 / 1e3
    )
}

/// Linux's initial window, bytes: ten segments of 1448.
const INITIAL_WINDOW: f64 = 14_480.0;
/// Loss events a verdict needs to speak of a rate (`MIN_LOSS_EVENTS` in rttscope's `link`).
const MIN_LOSS_EVENTS: u32 = 3;
/// A loss cell that draws fewer than [`MIN_LOSS_EVENTS`] losses more often than this cannot
/// test its cause.
const TOO_FEW_LOSSES: f64 = 0.1;

/// The chance that a Poisson count of mean `expected` is under [`MIN_LOSS_EVENTS`].
fn poisson_below_min_events(expected: f64) -> f64 {
    let mut term = (-expected).exp();
    let mut below = 0.0;
    for k in 0..MIN_LOSS_EVENTS {
        below += term;
        term *= expected / f64::from(k + 1);
    }
    below
}

impl Cause {
    /// What the cause lets through per round trip at `rtt_ms`, bytes; `None` for a cause that
    /// holds the transfer in time rather than by a pace (the slow server's sleeps).
    fn bytes_per_rtt(self, rtt_ms: u64) -> Option<f64> {
        let quarter_bdp = (16 * 1024 * rtt_ms / 5) as f64;
        let rtt = rtt_ms as f64 / 1e3;
        match self {
            Cause::SendBuffer => Some(quarter_bdp),
            // About 60 % of the doubled quarter BDP is advertised (see `setup`).
            Cause::ReceiveWindow => Some(1.2 * quarter_bdp),
            Cause::RandomLoss => Some(1448.0 * 1.22 / loss_rate(rtt_ms).sqrt()),
            Cause::LinkRate => Some(CAPPED_BPS as f64 / 8.0 * rtt),
            Cause::SlowClient => Some(READER_BYTES_PER_SECOND * rtt),
            Cause::SlowServer => None,
        }
    }
}

/// Round trips slow start (ten segments, doubling) takes to carry `bytes`.
fn slow_start_rounds(bytes: f64) -> u32 {
    (bytes / INITIAL_WINDOW + 1.0).log2().ceil() as u32
}

/// The round trip (from 1) in which slow start's window first reaches `per_rtt` bytes.
fn round_reaching(per_rtt: f64) -> u32 {
    (per_rtt / INITIAL_WINDOW).log2().ceil().max(0.0) as u32 + 1
}

/// The round trips and result sizes every cause meets.
pub const RTTS_MS: [u64; 3] = [5, 20, 80];
pub const SIZES_MIB: [u64; 3] = [1, 10, 40];

/// One cell of the confusion matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub cause: Cause,
    pub rtt_ms: u64,
    pub mib: u64,
}

impl Cell {
    /// `loss/80ms/40MiB`.
    pub fn key(&self) -> String {
        format!("{}/{}ms/{}MiB", self.cause.key(), self.rtt_ms, self.mib)
    }

    pub fn rtt(&self) -> Duration {
        Duration::from_millis(self.rtt_ms)
    }

    /// Why the cell cannot test its cause, if it cannot; decided from the setup, before any
    /// run. A result that slow start carries in the round trip its window first reaches the
    /// cause's pace, or in the one after, was held by slow start (no verdict names it): the
    /// cause could hold at most its last round trip (1 MiB at 80 ms is one bandwidth-delay
    /// product of the line, 7 round trips from ten segments, the pace of a clamped buffer, the
    /// capped line or the reader reached in the 6th). Random loss that strikes fewer times
    /// than a verdict needs to speak of a rate cannot be told either: its count in a cell is
    /// Poisson, and a cell that draws too few more than once in ten runs cannot test it (1 MiB
    /// at 20 ms expects 3.6 losses, and draws under three in 30 % of runs).
    pub fn excluded(&self) -> Option<String> {
        let bytes = (rows_for(self.mib) * (ROW_BYTES + 4)) as f64;
        if self.cause == Cause::RandomLoss {
            let expected = bytes / 1448.0 * loss_rate(self.rtt_ms);
            let too_few = poisson_below_min_events(expected);
            if too_few > TOO_FEW_LOSSES {
                return Some(format!(
                    "{expected:.1} losses expected, fewer than {MIN_LOSS_EVENTS} loss events in {:.0} % of runs",
                    100.0 * too_few
                ));
            }
        }
        let per_rtt = self.cause.bytes_per_rtt(self.rtt_ms)?;
        let (rounds, reached) = (slow_start_rounds(bytes), round_reaching(per_rtt));
        (rounds <= reached + 1).then(|| {
            format!("slow start: {rounds} round trips from ten segments, the cause's pace reached in the {reached}th")
        })
    }
}

/// Every cell, cause outer, then RTT, then size.
pub fn cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for cause in Cause::ALL {
        for rtt_ms in RTTS_MS {
            for mib in SIZES_MIB {
                cells.push(Cell { cause, rtt_ms, mib });
            }
        }
    }
    cells
}

/// `cells` gathered by cause and RTT, in order, with their sizes: what one rig runs.
pub fn groups(cells: &[Cell]) -> Vec<(Cause, u64, Vec<u64>)> {
    let mut groups: Vec<(Cause, u64, Vec<u64>)> = Vec::new();
    for cell in cells {
        match groups.last_mut() {
            Some((cause, rtt, sizes)) if *cause == cell.cause && *rtt == cell.rtt_ms => sizes.push(cell.mib),
            _ => groups.push((cell.cause, cell.rtt_ms, vec![cell.mib])),
        }
    }
    groups
}

/// The cells whose key contains every `/`-separated part of one of `only`'s comma-separated
/// filters (`loss`, `80ms`, `reader/1MiB`); all when `only` is empty.
pub fn select(only: &str) -> Result<Vec<Cell>, String> {
    let filters: Vec<Vec<&str>> =
        only.split(',').map(str::trim).filter(|f| !f.is_empty()).map(|f| f.split('/').collect()).collect();
    if filters.is_empty() {
        return Ok(cells());
    }
    let matches = |cell: &Cell, filter: &[&str]| {
        let key = cell.key();
        let parts: Vec<&str> = key.split('/').collect();
        filter.iter().all(|f| parts.contains(f))
    };
    let chosen: Vec<Cell> = cells().into_iter().filter(|c| filters.iter().any(|f| matches(c, f))).collect();
    if chosen.is_empty() {
        return Err(format!("no cell matches {only:?}; keys look like {}", cells()[0].key()));
    }
    Ok(chosen)
}
