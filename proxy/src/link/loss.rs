//! Loss as the long-haul socket shows it. rttscope mostly *receives* on that socket, and a
//! receiver never sees the sender's retransmission counters; it sees holes instead: segments
//! that arrive out of order ahead of a lost one (`rcv_ooopack`), and reads that stop until the
//! retransmission fills the hole — a recovery stall of about a round trip (fast retransmit)
//! or a retransmission timeout. One stall is one loss event, which is the `p` of the Mathis
//! bound (MSS / RTT × 1.22 / √p: what a loss-limited TCP can carry). What rttscope itself
//! sends (queries, uploads) it counts directly: its own retransmissions and RTOs, and the
//! server's DSACKs for segments it got twice.

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
    /// Largest segment received, bytes.
    pub mss: u32,
    /// Loss events (`recovery_stalls`) per data segment received.
    pub loss_rate: f64,
    /// What a TCP can carry at that loss rate, the measured MSS and the base RTT (the Mathis
    /// bound), bytes per second; `None` without loss.
    pub loss_limited_throughput: Option<u64>,
}

impl Loss {
    /// Evidence from the counters' movement over a transfer and the stalls seen in it.
    pub fn from_transfer(moved: &LossCounters, stalls: u32, stall_us: u64, mss: u32, rtt_us: u32) -> Loss {
        let segments_in = u64::from(moved.segments_in);
        let loss_rate = if segments_in > 0 { f64::from(stalls) / segments_in as f64 } else { 0.0 };
        let needed = moved.bytes_received.div_ceil(u64::from(mss.max(1)));
        let beyond_needed = if mss > 0 && segments_in > 0 { segments_in.saturating_sub(needed) } else { 0 };
        Loss {
            recovery_stalls: stalls,
            recovery_stall_us: stall_us,
            rto_stalls: 0,
            segments_in,
            out_of_order: u64::from(moved.out_of_order),
            duplicates: moved.dropped.map_or(beyond_needed, u64::from),
            retransmitted: u64::from(moved.retransmitted),
            rtos: u64::from(moved.rtos),
            dsack_dups: u64::from(moved.dsack_dups),
            reord_seen: u64::from(moved.reord_seen),
            mss,
            loss_rate,
            loss_limited_throughput: mathis_bound(mss, rtt_us, loss_rate),
        }
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
        let loss = Loss::from_transfer(&after.since(&before), 5, 100_000, 1_000, 20_000);
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
        let loss = Loss::from_transfer(&after.since(&before), 0, 0, 1_000, 20_000);
        assert_eq!(loss.duplicates, 7);
        // One reading without the count: the upper bound again.
        let unknown = LossCounters { dropped: None, ..after };
        assert_eq!(Loss::from_transfer(&unknown.since(&before), 0, 0, 1_000, 20_000).duplicates, 300);
    }
}
