//! Loss as the long-haul socket shows it. rttscope mostly *receives* on that socket, and a
//! receiver never sees the sender's recovery: `tcpi_ca_state`, `tcpi_total_retrans` and the
//! `tcpi_total_rto*` totals of rttscope's socket describe what rttscope sends (queries,
//! uploads), not the server's result. The server's losses show as holes instead: segments
//! that arrive out of order ahead of a lost one (`rcv_ooopack`), and reads that stop until the
//! retransmission fills the hole — a recovery stall of about a round trip (fast retransmit)
//! or a retransmission timeout. Stalls are grouped into the sender's recovery episodes
//! ([`Episodes`]): the kernel cuts a loss-based sender's window once per episode however many
//! segments of one window it lost, so an episode, not a stall, is a loss event, the `p` of
//! the Mathis bound (MSS / RTT × 1.22 / √p: what a loss-limited TCP can carry). What rttscope
//! itself sends it counts directly: its own retransmissions and RTOs, and the server's DSACKs
//! for segments it got twice.

use serde::{Deserialize, Serialize};

use crate::socket::LossCounters;

/// The Mathis et al. constant √(3/2): a Reno sender's average window under periodic loss.
const MATHIS_C: f64 = 1.22;

/// What one transfer showed of loss, duplication and reordering; the report's `links[].loss`
/// as it is, so these comments are that object's reference text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Loss {
    /// Reads that stood still until a retransmission filled a hole: loss events.
    pub recovery_stalls: u32,
    /// Those stalls' time together, µs.
    pub recovery_stall_us: u64,
    /// Of them, those as long as a retransmission timeout (nothing behind the lost segment to
    /// set off a fast retransmit).
    pub rto_stalls: u32,
    /// The sender's recovery episodes the stalls make: holes of one window the sender was
    /// already repairing count once, as the kernel's recovery (one window cut) does. Loss events.
    #[serde(default)]
    pub recovery_episodes: u32,
    /// Data segments received from the server during the transfer (TCP_INFO `data_segs_in`).
    pub segments_in: u64,
    /// Of `segments_in`, those that arrived behind a hole (TCP_INFO `rcv_ooopack`): loss or
    /// reordering.
    pub out_of_order: u64,
    /// Segments that arrived twice (duplicates, needless retransmissions): the ones the socket
    /// threw away as already had. Where the kernel does not say, an upper bound: segments
    /// beyond the full-sized ones the new bytes needed (short segments count too).
    pub duplicates: u64,
    /// Segments rttscope itself retransmitted during the transfer (what it sends: queries,
    /// uploads).
    pub retransmitted: u64,
    /// rttscope's own retransmission timeouts (TCP_INFO `total_rto`: Linux ≥ 6.7, else 0).
    pub rtos: u64,
    /// Segments the server reported getting twice (DSACK): duplicates of what rttscope sent.
    pub dsack_dups: u64,
    /// Reorderings of rttscope's segments the server's ACKs revealed (TCP_INFO `reord_seen`).
    pub reord_seen: u64,
    /// Recovery episodes after the first (which ends slow start) whose round trip before and
    /// round trip after were both timed (steady, undisturbed), and of them those after which the sender delivered at most ¾ of
    /// the round trip before: a loss-based sender cutting its window, not a path that held it.
    #[serde(default)]
    pub recoveries_timed: u32,
    /// Of `recoveries_timed`, those after which the sender delivered at most ¾ as much.
    #[serde(default)]
    pub recoveries_cut: u32,
    /// Largest segment received, bytes.
    pub mss: u32,
    /// Loss events (`recovery_episodes`) per data segment received.
    pub loss_rate: f64,
    /// What a TCP can carry at that loss rate, the measured MSS and the base RTT (the Mathis
    /// bound), bytes per second; `None` without loss.
    pub loss_limited_throughput: Option<u64>,
}

impl Loss {
    /// Evidence from the counters' movement over a transfer and the stalls seen in it.
    pub fn from_transfer(moved: &LossCounters, stalls: &Stalls, mss: u32, rtt_us: u32) -> Loss {
        let segments_in = u64::from(moved.segments_in);
        let episodes = stalls.episodes.count;
        let loss_rate = if segments_in > 0 { f64::from(episodes) / segments_in as f64 } else { 0.0 };
        let needed = moved.bytes_received.div_ceil(u64::from(mss.max(1)));
        let beyond_needed = if mss > 0 && segments_in > 0 { segments_in.saturating_sub(needed) } else { 0 };
        Loss {
            recovery_stalls: stalls.count,
            recovery_stall_us: stalls.us,
            rto_stalls: stalls.rto,
            recovery_episodes: episodes,
            segments_in,
            out_of_order: u64::from(moved.out_of_order),
            duplicates: moved.dropped.map_or(beyond_needed, u64::from),
            retransmitted: u64::from(moved.retransmitted),
            rtos: u64::from(moved.rtos),
            dsack_dups: u64::from(moved.dsack_dups),
            reord_seen: u64::from(moved.reord_seen),
            recoveries_timed: 0,
            recoveries_cut: 0,
            mss,
            loss_rate,
            loss_limited_throughput: mathis_bound(mss, rtt_us, loss_rate),
        }
    }
}

/// Recovery stalls of one transfer: reads that stood still until a retransmission arrived.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stalls {
    pub count: u32,
    /// Their time together, µs.
    pub us: u64,
    /// Of them, those as long as a retransmission timeout.
    pub rto: u32,
    pub episodes: Episodes,
}

impl Stalls {
    /// A stall from `start_us` to `end_us` (`counted_us` of it charged to recovery), on a path
    /// whose base RTT is `rtt_us`: whether it began a recovery episode.
    pub fn add(&mut self, start_us: u64, end_us: u64, counted_us: u64, timeout: bool, rtt_us: u64) -> bool {
        self.count += 1;
        self.us += counted_us;
        self.rto += u32::from(timeout);
        self.episodes.stall(start_us, end_us, timeout, rtt_us)
    }

    /// `count` stalls of `us` in all, each an episode of its own (for tests of the words).
    #[cfg(test)]
    pub fn apart(count: u32, us: u64) -> Stalls {
        let episodes = Episodes { count, last: None };
        Stalls { count, us, rto: 0, episodes }
    }
}

/// The sender's recovery episodes as the receiver can count them. A loss-based sender that
/// learns of a loss (three duplicate ACKs, RACK, or a timeout) enters recovery, cuts its window
/// once, and retransmits every segment it finds lost until what it had sent when it began is
/// acknowledged. The receiver sees each lost segment as a stall; the first of an episode lasts
/// at least a round trip (the news travels to the sender, the retransmission back), while the
/// next holes of the same window are filled by retransmissions already under way, sooner than
/// a round trip after the reads stopped. So a stall that starts within a round trip of the last
/// one's end and lasts less than a round trip is the same episode; so is a timeout right
/// after a timeout (the kernel's RTO backed off within one `TCP_CA_Loss`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Episodes {
    pub count: u32,
    /// When the latest stall ended, µs, and whether it was a timeout.
    last: Option<(u64, bool)>,
}

impl Episodes {
    /// A stall from `start_us` to `end_us`: whether it began an episode.
    pub fn stall(&mut self, start_us: u64, end_us: u64, timeout: bool, rtt_us: u64) -> bool {
        let rtt = rtt_us.max(1);
        let continues = self.last.is_some_and(|(last_end, last_timeout)| {
            start_us < last_end.saturating_add(rtt)
                && (end_us.saturating_sub(start_us) < rtt || (timeout && last_timeout))
        });
        self.last = Some((end_us, timeout));
        self.count += u32::from(!continues);
        !continues
    }
}

/// MSS / RTT × 1.22 / √p, bytes/s: the most a TCP losing a fraction `p` of its segments
/// (one loss event each) can carry (Mathis, Semke, Mahdavi, Ott 1997). `None` without loss.
pub fn mathis_bound(mss: u32, rtt_us: u32, p: f64) -> Option<u64> {
    if p <= 0.0 || mss == 0 || rtt_us == 0 {
        return None;
    }
    Some((f64::from(mss) * 1e6 / f64::from(rtt_us) * MATHIS_C / p.sqrt()) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mathis_bound_of_one_percent_at_20_ms() {
        // 1448 B / 20 ms × 1.22 / 0.1 = 883 KB/s, about 7 Mbit/s.
        assert_eq!(mathis_bound(1448, 20_000, 0.01), Some(883_280));
        assert_eq!(mathis_bound(1448, 20_000, 0.0), None);
    }

    #[test]
    fn evidence_counts_what_moved() {
        let before = LossCounters { segments_in: 100, bytes_received: 1_000, ..LossCounters::default() };
        // 1000 new full segments of 1000 B arrived as 1010: ten of them twice.
        let after = LossCounters {
            segments_in: 1_110,
            bytes_received: 1_001_000,
            out_of_order: 40,
            retransmitted: 1,
            ..LossCounters::default()
        };
        let loss = Loss::from_transfer(&after.since(&before), &Stalls::apart(5, 100_000), 1_000, 20_000);
        assert_eq!((loss.segments_in, loss.duplicates, loss.out_of_order), (1_010, 10, 40));
        assert!((loss.loss_rate - 5.0 / 1_010.0).abs() < 1e-9);
        assert!(after.retransmission_moved(&before));
        assert!(!after.retransmission_moved(&after));
    }

    #[test]
    fn segments_thrown_away_are_the_duplicates_when_the_kernel_counts_them() {
        // Short segments make 1,300 arrive for 1,000 full ones' bytes; the socket threw 7 away.
        let before = LossCounters { dropped: Some(3), ..LossCounters::default() };
        let after = LossCounters {
            segments_in: 1_300,
            bytes_received: 1_000_000,
            dropped: Some(10),
            ..LossCounters::default()
        };
        let loss = Loss::from_transfer(&after.since(&before), &Stalls::apart(0, 0), 1_000, 20_000);
        assert_eq!(loss.duplicates, 7);
        // One reading without the count: the upper bound again.
        let unknown = LossCounters { dropped: None, ..after };
        assert_eq!(Loss::from_transfer(&unknown.since(&before), &Stalls::apart(0, 0), 1_000, 20_000).duplicates, 300);
    }
}
