//! Verdicts on the upstream link: which one limit held a transfer back,
//! the evidence, and the fix sized from the measured RTT and bandwidth.
//! Kept by the collector, bounded.

use std::collections::{BTreeMap, VecDeque};

use super::emulated;
use super::expected::{Expected, HostCheck};
use super::loss::Loss;
use super::measurement::{LOSS_OUTRUN, LinkLimit, MIN_LOSS_EVENTS, Measurement, READER_TAIL_SHARE, window_closed};
use super::sysctl::Sysctls;
use crate::human::{bytes, count, counted, rate, us};
use crate::inject::EmulatedLink;

/// A measurement with its connection, time and words.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkVerdict {
    /// The relay's connection id.
    pub conn_id: u64,
    /// When the transfer ended, µs since the recording epoch.
    pub at_us: u64,
    /// The numbers the verdict was drawn from; `measurement.limit` is the verdict itself.
    pub measurement: Measurement,
    /// Fastest delivery seen on this upstream, or the configured bandwidth.
    pub path_bytes_per_second: Option<u64>,
    /// Bandwidth-delay product of that path at the base RTT, bytes; `None` without a path figure.
    pub bdp: Option<u64>,
    /// One sentence for the user: what moved, how fast, and what held it back.
    pub summary: String,
    /// What to change, sized from the measured RTT and bandwidth.
    pub fix: String,
}

/// Verdicts kept for the report.
const KEPT: usize = 100;

/// The collector's store of link verdicts: the latest 100 for reports, counts by limit for metrics.
#[derive(Debug)]
pub struct Links {
    sysctls: Sysctls,
    expected: Expected,
    host_check: HostCheck,
    fastest: u64,
    recent: VecDeque<LinkVerdict>,
    /// Transfers and their time, by limit, since start (metrics).
    pub totals: BTreeMap<&'static str, (u64, u64)>,
    /// Upstream base RTT readings, in seconds: `rttscope_upstream_rtt_seconds`.
    pub rtt: crate::record::BucketHistogram,
    /// The link `inject` emulates now, if any: a transfer it held is its verdict.
    emulated: Option<EmulatedLink>,
}

impl Links {
    /// `sysctls` and `expected` go into the words of every verdict.
    pub fn new(sysctls: Sysctls, expected: Expected) -> Links {
        Links {
            sysctls,
            expected,
            host_check: HostCheck::default(),
            fastest: 0,
            recent: VecDeque::new(),
            totals: LinkLimit::ALL.iter().map(|l| (l.name(), (0, 0))).collect(),
            rtt: crate::record::BucketHistogram::new(crate::record::SECONDS_BUCKETS),
            emulated: None,
        }
    }

    /// The link `inject` emulates from now on (set before each batch of measurements).
    pub fn set_emulated(&mut self, emulated: Option<EmulatedLink>) {
        self.emulated = emulated;
    }

    /// The host's TCP buffer limits as read at start-up.
    pub fn sysctls(&self) -> &Sysctls {
        &self.sysctls
    }

    /// Words and fix for a measurement; remembers it. A transfer the emulated link held is
    /// the emulation's: its limit and its words, never the server's or the real path's.
    pub fn add(&mut self, conn_id: u64, at_us: u64, mut m: Measurement) -> &LinkVerdict {
        let emulated = self.emulated.filter(|_| m.limit != LinkLimit::Latency && emulated::held(&m));
        if let Some(link) = &emulated {
            (m.limit, m.secondary) = (emulated::limit(link), None);
        }
        let rtt = u64::from(m.base_rtt_us.max(1));
        if m.limit == LinkLimit::Link && emulated.is_none() {
            self.fastest = self.fastest.max(m.throughput);
            // The start-up check knew only the configured figures (often none): the path as
            // measured is the one the host's ceilings must fit.
            for problem in self.host_check.check(&self.sysctls, self.fastest * rtt / 1_000_000) {
                tracing::warn!(measured_bps = self.fastest * 8, rtt_us = rtt, "{problem}");
            }
        }
        let path = self.expected.bytes_per_second.or((self.fastest > 0).then_some(self.fastest));
        let bdp = path.map(|p| p * rtt / 1_000_000);
        let (mut summary, mut fix) = match &emulated {
            Some(link) => emulated::words(&m, link),
            None => self.words(&m, path, bdp),
        };
        summary.push_str(&lag_words(&m));
        if emulated.is_none() {
            summary.push_str(&self.expected.words(&m));
            if let Some((more, more_fix)) = loss_words(&m) {
                summary.push_str(&more);
                fix.push_str(&more_fix);
            }
        }
        let entry = self.totals.entry(m.limit.name()).or_default();
        entry.0 += 1;
        entry.1 += m.duration_us;
        if self.recent.len() >= KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(LinkVerdict {
            conn_id,
            at_us,
            measurement: m,
            path_bytes_per_second: path,
            bdp,
            summary,
            fix,
        });
        self.recent.back().expect("just pushed")
    }

    fn words(&self, m: &Measurement, path: Option<u64>, bdp: Option<u64>) -> (String, String) {
        let rtt = us(u64::from(m.base_rtt_us));
        let moved = format!("{} in {} ({}) over a {rtt} RTT", bytes(m.bytes), us(m.duration_us), rate(m.throughput));
        // Buffer sizes to recommend: twice the BDP, or 4 MiB when the path is unknown.
        let need = bdp.map_or(4 << 20, |b| (2 * b).max(64 << 10));
        let path_words = path.map(|p| format!(" on a path that delivered {}", rate(p))).unwrap_or_default();
        match m.limit {
            LinkLimit::Link => (
                format!("{moved}: the path's bandwidth is the limit; {} in flight per round trip", bytes(m.bytes_per_rtt)),
                "Nothing to tune at either end: move less data (fewer columns or rows, compression) or move closer.".to_owned(),
            ),
            LinkLimit::ReceiveWindow => {
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
            LinkLimit::Sender => (
                format!(
                    "{moved}: the server sends at most {} per {rtt} RTT{path_words}, while rttscope advertised {}",
                    bytes(m.bytes_per_rtt),
                    bytes(m.advertised_window)
                ),
                format!(
                    "The server's send buffer is pinned: remove its SO_SNDBUF setting (or the driver/server option that sets it), or raise net.core.wmem_max and net.ipv4.tcp_wmem max on the server to at least {need} bytes (2 × the bandwidth-delay product)."
                ),
            ),
            LinkLimit::ClientReader => (
                format!("{moved}: the application read slowly{}", reader_words(m)),
                "Read results as they arrive (stream them) instead of processing row by row between reads, or give the application more CPU; nothing on the network will help.".to_owned(),
            ),
            LinkLimit::Server => (
                format!(
                    "{moved}: the server paused {} for {} in all with nothing in flight",
                    counted(u64::from(m.server_pauses), "time", "times"),
                    us(m.server_pause_us)
                ),
                "The server produces this result slowly: check the query plan, locks and I/O on the server; the link is idle meanwhile.".to_owned(),
            ),
            LinkLimit::Loss => {
                let l = &m.loss;
                (
                    format!(
                        "{moved}: loss is the limit: {} of the sender ({}, {} in all) in {} received, a loss rate of {:.2}%; \
                         a TCP losing that much with {} segments at that RTT carries at most {} (the Mathis bound, MSS / RTT × 1.22 / √p), \
                         and this one carried {}{}{}",
                        counted(u64::from(l.recovery_episodes), "recovery episode", "recovery episodes"),
                        counted(u64::from(l.recovery_stalls), "stall", "stalls"),
                        us(l.recovery_stall_us),
                        counted(l.segments_in, "segment", "segments"),
                        100.0 * l.loss_rate,
                        bytes(u64::from(l.mss)),
                        rate(l.loss_limited_throughput.unwrap_or(0)),
                        rate(m.throughput),
                        above_bound_words(m),
                        cut_words(l)
                    ),
                    "Packets are lost between rttscope and the server: bigger buffers will not help (the sender's window is what loss leaves it). \
                     Look for drops on the path: interface errors and drops on both hosts (ip -s link), a policer or an overflowing queue, a bad cable or radio link; \
                     a sender with BBR congestion control (net.ipv4.tcp_congestion_control=bbr on the server) loses less to random loss."
                        .to_owned(),
                )
            }
            LinkLimit::Latency => (
                format!(
                    "{} took {} at a {rtt} RTT: round trips, not bytes, are the cost",
                    counted(m.round_trips, "small round trip", "small round trips"),
                    us(m.duration_us)
                ),
                "Fewer round trips: batch statements, fetch related rows with JOINs or IN lists, move the database closer (see the findings for which statements).".to_owned(),
            ),
        }
    }

    /// The recent verdicts, newest last.
    pub fn recent(&self) -> impl Iterator<Item = &LinkVerdict> {
        self.recent.iter()
    }

    /// Forgets the recent verdicts (`POST /reset`); the metrics totals keep counting.
    pub fn reset(&mut self) {
        self.recent.clear();
    }
}

/// What a slow client did: held rttscope off (and what that cost), and what it had still to
/// read when the server was done.
fn reader_words(m: &Measurement) -> String {
    let mut words = String::new();
    if m.held_off_us > 0 {
        words.push_str(&format!(
            "; rttscope's buffer was full and it stopped reading the server for {} ({:.0}% of the transfer){}",
            us(m.held_off_us),
            100.0 * m.held_off_us as f64 / m.duration_us.max(1) as f64,
            reader_cost_words(m)
        ));
    }
    if let Some(unread) = m.client_unread_at_end.filter(|_| m.reader_left_behind()) {
        words.push_str(&format!(
            "; when the server's last byte reached rttscope the application had still to take {} of the response ({:.0}%)",
            bytes(unread),
            100.0 * unread as f64 / m.bytes.max(1) as f64
        ));
        if m.client_readings > 0 {
            words.push_str(&format!(
                ", and it was behind at {} of {} readings of its socket",
                m.client_behind_readings, m.client_readings
            ));
        }
    }
    words
}

/// How a slow client cost the transfer time: the server's window shut, or the response's end
/// waiting in rttscope's socket for the client.
fn reader_cost_words(m: &Measurement) -> String {
    let mut words = String::new();
    if window_closed(m.window_after_hold, m.loss.mss) {
        words.push_str(", closing the server's window");
    }
    if m.backlog_held_us as f64 >= 0.25 * m.duration_us as f64 {
        words.push_str(&format!(
            "; for {} of it the server's bytes were already waiting in rttscope's socket",
            us(m.backlog_held_us)
        ));
    }
    if let Some(pace) = m.reader_pace().filter(|_| m.at_reader_pace()) {
        words.push_str(&format!(
            "; while it was behind it took {pace_words}, and the transfer moved at {:.0}% of that: the application's pace",
            100.0 * m.throughput as f64 / pace.max(1) as f64,
            pace_words = rate(pace)
        ));
    }
    if let Some(pace) = m.pace_while_held().filter(|_| m.slowed_while_held()) {
        words.push_str(&format!(
            "; while it waited the server's bytes reached rttscope at {}, {:.0}% of the transfer's pace: the server slowed each time the application fell behind",
            rate(pace),
            100.0 * pace as f64 / m.throughput.max(1) as f64
        ));
    }
    if m.reader_tail_us as f64 >= READER_TAIL_SHARE * m.duration_us as f64 {
        words.push_str(&format!(
            "; the last of the response had arrived {} before the application took it",
            us(m.reader_tail_us)
        ));
    }
    words
}

/// Why a transfer above the Mathis bound was still loss's: the bound is a steady state, and
/// a sender cut every few round trips (its cuts partly undone when a hole was only
/// reordering) never reached one, nor filled the path between the cuts.
fn above_bound_words(m: &Measurement) -> String {
    let l = &m.loss;
    let above = l.loss_limited_throughput.is_some_and(|b| m.throughput as f64 > b as f64 * LOSS_OUTRUN);
    if !above || l.recovery_episodes == 0 {
        return String::new();
    }
    let rtts = m.duration_us as f64 / f64::from(m.base_rtt_us.max(1));
    format!(
        ", above the bound but with a loss event every {:.1} round trips and the pipe empty {:.0}% of the time between them: the losses kept cutting the window before it filled the path",
        rtts / f64::from(l.recovery_episodes),
        100.0 * m.idle_after_first_loss_us as f64 / m.after_first_loss_us.max(1) as f64
    )
}

/// What the sender did after its recoveries, where they were timed: the window cut each time
/// is what tells loss from a path that held the sender at the same rate.
fn cut_words(l: &Loss) -> String {
    if l.recoveries_timed == 0 || 3 * l.recoveries_cut < 2 * l.recoveries_timed {
        return String::new();
    }
    format!(
        "; after {} of {} recoveries timed it delivered at most ¾ as much a round trip as before: it cut its window for the losses",
        l.recoveries_cut, l.recoveries_timed
    )
}

/// What a verdict says of a client that held rttscope off without costing the transfer
/// anything: the path kept delivering meanwhile.
fn lag_words(m: &Measurement) -> String {
    let held = m.held_off_us as f64 / m.duration_us.max(1) as f64;
    if m.limit == LinkLimit::ClientReader || m.limit == LinkLimit::Latency || held < 0.1 {
        return String::new();
    }
    // The pace beside the transfer's: a server far slower while held than overall (hold-offs
    // too short a share to weigh, `slowed_while_held`) is said to be, not only to have sent.
    let pace = m.pace_while_held().map(|p| {
        format!(
            " (its bytes reached rttscope at {}, {:.0}% of the transfer's pace, while it waited)",
            rate(p),
            100.0 * p as f64 / m.throughput.max(1) as f64
        )
    });
    format!(
        "; the application fell behind at times (rttscope stopped reading the server for {}, {:.0}% of the transfer), but the server kept sending meanwhile{}: not a limit here",
        us(m.held_off_us),
        100.0 * held,
        pace.unwrap_or_default()
    )
}

/// What a verdict adds about loss it did not name as the limit: a second limit beside a
/// window, or — when it cost nothing — holes, reordering and duplicates seen and harmless.
fn loss_words(m: &Measurement) -> Option<(String, String)> {
    let l = &m.loss;
    if m.limit == LinkLimit::Loss || m.limit == LinkLimit::Latency {
        return None;
    }
    if m.secondary == Some(LinkLimit::Loss) {
        return Some((
            format!(
                "; loss bound it too: {} recovery stalls ({} of them retransmission timeouts) took {} ({:.0}% of the transfer) at a loss rate of {:.2}% (Mathis bound {})",
                l.recovery_stalls,
                l.rto_stalls,
                us(l.recovery_stall_us),
                100.0 * l.recovery_stall_us as f64 / m.duration_us.max(1) as f64,
                100.0 * l.loss_rate,
                rate(l.loss_limited_throughput.unwrap_or(0))
            ),
            " Then the loss: find where packets are dropped on the path; with a small window each loss costs a round trip or a retransmission timeout of nothing delivered.".to_owned(),
        ));
    }
    let mut seen = Vec::new();
    if l.out_of_order > 0 {
        seen.push(format!(
            "{} out of order ({} filled in {})",
            counted(l.out_of_order, "segment arrived", "segments arrived"),
            counted(u64::from(l.recovery_stalls), "hole", "holes"),
            us(l.recovery_stall_us)
        ));
    }
    if l.duplicates > 0 {
        seen.push(format!("about {} arrived twice", count(l.duplicates)));
    }
    if l.retransmitted > 0 || l.dsack_dups > 0 || l.reord_seen > 0 {
        seen.push(format!(
            "rttscope resent {}, the server saw {} of them twice and {} reordered",
            counted(l.retransmitted, "segment", "segments"),
            l.dsack_dups,
            l.reord_seen
        ));
    }
    if seen.is_empty() {
        return None;
    }
    // Far faster than the bound of their rate: a full path's queue overflowing as a Reno sender
    // probed it, or random loss a BBR sender ignores — either way not what set the pace.
    let outran = l
        .loss_limited_throughput
        .filter(|&b| l.recovery_episodes >= MIN_LOSS_EVENTS && m.throughput as f64 > b as f64 * LOSS_OUTRUN)
        .map(|b| format!(" ({:.1} × the Mathis bound of their loss rate arrived)", m.throughput as f64 / b as f64))
        .unwrap_or_default();
    Some((format!("; {}: harmless, they did not limit this transfer{outran}", seen.join(", ")), String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::loss::Loss;
    use crate::link::measurement::test_measurement;

    fn measurement(limit: LinkLimit) -> Measurement {
        test_measurement(limit)
    }

    /// The loss evidence of `stalls` recovery episodes apart (`stall_us` in all) in
    /// `segments_in` full segments at `rtt_us`.
    fn loss_of(segments_in: u32, stalls: u32, stall_us: u64, rtt_us: u32) -> Loss {
        Loss::from_transfer(
            &crate::socket::LossCounters { segments_in, ..Default::default() },
            &crate::link::loss::Stalls::apart(stalls, stall_us),
            1448,
            rtt_us,
        )
    }

    #[test]
    fn drops_a_transfer_outran_are_harmless_with_the_ratio() {
        let mut links = Links::new(Sysctls::default(), Expected::default());
        let mut m = measurement(LinkLimit::Link);
        m.loss = loss_of(5_600, 6, 114_000, 20_000);
        m.throughput = 10_000_000;
        m.loss.out_of_order = 840;
        let words = links.add(1, 0, m).summary.clone();
        assert!(words.contains("840 segments arrived out of order (6 holes filled in 114.00 ms)"), "{words}");
        assert!(words.contains("harmless, they did not limit this transfer (3.7 × the Mathis bound"), "{words}");
    }

    #[test]
    fn loss_above_its_bound_says_why_it_is_still_the_limit() {
        let mut links = Links::new(Sysctls::default(), Expected::default());
        let mut m = measurement(LinkLimit::Loss);
        // 20 holes in 100 round trips of 1 ms, 3 × the bound, the pipe half empty after the
        // first loss (less over the whole transfer, slow start's first 20 ms with it).
        m.loss = loss_of(7_000, 20, 30_000, 1_000);
        m.throughput = 3 * m.loss.loss_limited_throughput.unwrap();
        m.idle_us = 45_000;
        (m.after_first_loss_us, m.idle_after_first_loss_us) = (80_000, 40_000);
        let words = links.add(1, 0, m).summary.clone();
        assert!(
            words.ends_with("above the bound but with a loss event every 5.0 round trips and the pipe empty 50% of the time between them: the losses kept cutting the window before it filled the path"),
            "{words}"
        );
        m.throughput = m.loss.loss_limited_throughput.unwrap();
        let words = links.add(1, 0, m).summary.clone();
        assert!(!words.contains("above the bound"), "{words}");
    }

    #[test]
    fn loss_under_its_bound_says_the_recoveries_cut_the_window() {
        let mut links = Links::new(Sysctls::default(), Expected::default());
        let mut m = measurement(LinkLimit::Loss);
        m.loss = loss_of(7_000, 20, 30_000, 1_000);
        (m.loss.recoveries_timed, m.loss.recoveries_cut) = (12, 11);
        m.throughput = m.loss.loss_limited_throughput.unwrap() * 8 / 10;
        let words = links.add(1, 0, m).summary.clone();
        assert!(
            words.ends_with("after 11 of 12 recoveries timed it delivered at most ¾ as much a round trip as before: it cut its window for the losses"),
            "{words}"
        );
        // Recoveries that mostly left the window as it was say nothing of cutting it.
        m.loss.recoveries_cut = 7;
        let words = links.add(1, 0, m).summary.clone();
        assert!(!words.contains("recoveries timed"), "{words}");
    }

    /// A reader slower than the path that never held rttscope off (its socket and rttscope's
    /// took the response as it came) is still what the application waited for: the response
    /// left unread when the server was done says so. Before, such a reader over the WAN
    /// emulator with default buffers read `link` (link_verdicts.rs).
    #[test]
    fn a_reader_left_behind_when_the_server_was_done_is_the_limit() {
        let mut links = Links::new(Sysctls::default(), Expected::default());
        // 1 MiB in 100 ms; the application had 300 KiB of it still to take.
        let behind = measurement(LinkLimit::Sender).with_client_unread(300 << 10);
        assert_eq!((behind.limit, behind.secondary), (LinkLimit::ClientReader, None));
        let words = links.add(1, 0, behind).summary.clone();
        assert!(
            words.ends_with(": the application read slowly; when the server's last byte reached rttscope the application had still to take 300.0 KiB of the response (29%)"),
            "{words}"
        );
        // A reader at the path's pace has only the buffers left: the verdict stands.
        let kept_up = measurement(LinkLimit::Sender).with_client_unread(60 << 10);
        assert_eq!(kept_up.limit, LinkLimit::Sender);
        let tenth = measurement(LinkLimit::Link).with_client_unread(100 << 10);
        assert_eq!(tenth.limit, LinkLimit::Link, "a tenth left, no hold-off: not the reader");
        // Held off a third of a 40 MiB transfer and still behind at its end by more than the
        // buffers: the path had slowed to the reader's pace, so less is left at the end.
        let mut held = measurement(LinkLimit::Link);
        (held.bytes, held.duration_us, held.held_off_us) = (40 << 20, 8_000_000, 2_700_000);
        assert_eq!(held.with_client_unread(2 << 20).limit, LinkLimit::ClientReader);
        assert_eq!(held.with_client_unread(32 << 10).limit, LinkLimit::Link, "only a buffer's worth left");
        // Behind at under half of the readings (the fast reader of the 30 Mbit/s cell that
        // once left this much): not taken for a slow one.
        let mut stalled = measurement(LinkLimit::Link);
        (stalled.client_readings, stalled.client_behind_readings) = (20, 9);
        assert_eq!(stalled.with_client_unread(600 << 10).limit, LinkLimit::Link);
        (stalled.client_readings, stalled.client_behind_readings) = (28, 16);
        let slow = stalled.with_client_unread(600 << 10);
        assert_eq!(slow.limit, LinkLimit::ClientReader);
        let words = links.add(1, 0, slow).summary.clone();
        assert!(words.ends_with("(59%), and it was behind at 16 of 28 readings of its socket"), "{words}");
        // Not read (a report from before, a socket that could not be read): as judged.
        assert_eq!(measurement(LinkLimit::Sender).client_unread_at_end, None);
    }

    #[test]
    fn a_slow_client_is_said_to_have_cost_what_it_cost() {
        let mut links = Links::new(Sysctls::default(), Expected::default());
        let mut shut = measurement(LinkLimit::ClientReader);
        (shut.duration_us, shut.held_off_us, shut.window_after_hold) = (2_000_000, 1_500_000, Some(0));
        let words = links.add(1, 0, shut).summary.clone();
        assert!(words.ends_with("(75% of the transfer), closing the server's window"), "{words}");
        let mut waited = shut;
        (waited.window_after_hold, waited.reader_tail_us) = (Some(4 << 20), 800_000);
        let words = links.add(1, 0, waited).summary.clone();
        assert!(
            words.ends_with(
                "(75% of the transfer); the last of the response had arrived 800.00 ms before the application took it"
            ),
            "{words}"
        );
        // Held off as long, at the link's pace: said, and said to be harmless.
        let mut lagged = waited;
        (lagged.limit, lagged.reader_tail_us, lagged.held_off_us) = (LinkLimit::Link, 1_000, 560_000);
        let words = links.add(1, 0, lagged).summary.clone();
        assert!(words.contains("; the application fell behind at times (rttscope stopped reading the server for 560.00 ms, 28% of the transfer), but the server kept sending meanwhile: not a limit here"), "{words}");
        // With the hold-offs read at both ends: how fast the server went on sending.
        (lagged.held_received, lagged.held_timed_us) = (5_000_000, 500_000);
        let words = links.add(1, 0, lagged).summary.clone();
        assert!(words.contains("but the server kept sending meanwhile (its bytes reached rttscope at 10.0 MB/s, 95% of the transfer's pace, while it waited): not a limit here"), "{words}");
        lagged.held_off_us = 100_000;
        let words = links.add(1, 0, lagged).summary.clone();
        assert!(!words.contains("fell behind"), "{words}");
        // A transfer at the pace the application took while behind: its pace, said with it.
        let mut paced = shut;
        (paced.window_after_hold, paced.throughput, paced.reader_taken, paced.reader_timed_us) =
            (Some(4 << 20), 5_200_000, 5_000_000, 1_000_000);
        let words = links.add(1, 0, paced).summary.clone();
        assert!(
            words.ends_with("(75% of the transfer); while it was behind it took 5.0 MB/s, and the transfer moved at 104% of that: the application's pace"),
            "{words}"
        );
        let mut slowed = paced;
        (slowed.reader_taken, slowed.held_received, slowed.held_timed_us) = (500_000, 1_500_000, 1_000_000);
        let words = links.add(1, 0, slowed).summary.clone();
        assert!(
            words.ends_with("(75% of the transfer); while it waited the server's bytes reached rttscope at 1.5 MB/s, 29% of the transfer's pace: the server slowed each time the application fell behind"),
            "{words}"
        );
    }

    #[test]
    fn counts_of_one_are_said_in_the_singular() {
        let mut links = Links::new(Sysctls::default(), Expected::default());
        let server = links.add(1, 0, measurement(LinkLimit::Server)).summary.clone();
        assert!(server.contains("the server paused 1 time for 50.00 ms"), "{server}");
        let latency = links.add(1, 0, measurement(LinkLimit::Latency)).summary.clone();
        assert!(latency.starts_with("1 small round trip took 100.00 ms"), "{latency}");
        let one_each = Loss::from_transfer(
            &crate::socket::LossCounters { segments_in: 1, retransmitted: 1, ..Default::default() },
            &crate::link::loss::Stalls::apart(1, 200_000),
            1448,
            20_000,
        );
        let mut lossy = measurement(LinkLimit::Loss);
        lossy.loss = one_each;
        let loss = links.add(1, 0, lossy).summary.clone();
        for said in ["1 recovery episode of the sender (1 stall, ", "in 1 segment received"] {
            assert!(loss.contains(said), "no {said:?} in {loss}");
        }
        let mut beside = measurement(LinkLimit::Link);
        beside.loss = one_each;
        beside.loss.out_of_order = 1;
        let words = links.add(1, 0, beside).summary.clone();
        for said in ["1 segment arrived out of order (1 hole filled", "rttscope resent 1 segment,"] {
            assert!(words.contains(said), "no {said:?} in {words}");
        }
    }
}
