//! `links[]` in the schema: one verdict on the upstream link per large transfer (or run of
//! small responses), built from the link module's [`LinkVerdict`]s.

use serde::{Deserialize, Serialize};

use crate::link::{LinkLimit, LinkVerdict, Loss};

/// A verdict on the upstream link: the one limit that held a transfer back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkReport {
    pub limit: LinkLimit,
    /// A second limit that bound at the same time (`loss` beside a window), or null.
    #[serde(default)]
    pub secondary: Option<LinkLimit>,
    pub conn_id: u64,
    /// When the transfer ended, µs on the recording's clock.
    pub at_us: u64,
    pub bytes: u64,
    pub duration_us: u64,
    /// Bytes per second.
    pub throughput: u64,
    pub rtt_us: u32,
    pub base_rtt_us: u32,
    /// Bytes delivered per round trip: the effective window.
    pub bytes_per_rtt: u64,
    /// Largest receive window rttscope advertised.
    pub advertised_window: u64,
    pub receive_buffer: u64,
    pub idle_us: u64,
    /// Time rttscope stopped reading upstream because the client lagged.
    pub held_off_us: u64,
    pub server_pauses: u32,
    pub server_pause_us: u64,
    pub samples: u32,
    pub round_trips: u64,
    /// Fastest delivery seen on this upstream, or the configured bandwidth (bytes per second).
    pub path_bytes_per_second: Option<u64>,
    /// Bandwidth-delay product of that path, bytes.
    pub bdp: Option<u64>,
    /// Loss, duplication and reordering seen during the transfer.
    #[serde(default)]
    pub loss: LossReport,
    pub summary: String,
    pub fix: String,
}

/// `links[].loss`: what the long-haul socket showed of loss while the transfer lasted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LossReport {
    /// Reads that stood still until a retransmission filled a hole: loss events.
    pub recovery_stalls: u32,
    pub recovery_stall_us: u64,
    /// Of them, those as long as a retransmission timeout.
    pub rto_stalls: u32,
    /// Data segments received from the server, and those that arrived behind a hole.
    pub segments_in: u64,
    pub out_of_order: u64,
    /// Segments that arrived twice (duplicates, needless retransmissions), as the socket
    /// counted the ones it threw away.
    pub duplicates: u64,
    /// Segments rttscope itself retransmitted, and its retransmission timeouts.
    pub retransmitted: u64,
    pub rtos: u64,
    /// Segments the server reported getting twice (DSACK), and reorderings it revealed.
    pub dsack_dups: u64,
    pub reord_seen: u64,
    /// Largest segment received, bytes.
    pub mss: u32,
    /// Loss events per segment received.
    pub loss_rate: f64,
    /// What a TCP can carry at that loss rate, MSS and RTT (Mathis bound), bytes per second.
    pub loss_limited_throughput: Option<u64>,
}

impl From<&Loss> for LossReport {
    fn from(l: &Loss) -> LossReport {
        LossReport {
            recovery_stalls: l.recovery_stalls,
            recovery_stall_us: l.recovery_stall_us,
            rto_stalls: l.rto_stalls,
            segments_in: l.segments_in,
            out_of_order: l.out_of_order,
            duplicates: l.duplicates,
            retransmitted: l.retransmitted,
            rtos: l.rtos,
            dsack_dups: l.dsack_dups,
            reord_seen: l.reord_seen,
            mss: l.mss,
            loss_rate: l.loss_rate,
            loss_limited_throughput: l.loss_limited_throughput,
        }
    }
}

impl LinkReport {
    /// `receive_window + loss`: the limit and the one beside it.
    pub fn limits(&self) -> String {
        match self.secondary {
            Some(second) => format!("{} + {second}", self.limit),
            None => self.limit.to_string(),
        }
    }
}

impl From<&LinkVerdict> for LinkReport {
    fn from(v: &LinkVerdict) -> LinkReport {
        let m = &v.measurement;
        LinkReport {
            limit: m.limit,
            secondary: m.secondary,
            conn_id: v.conn_id,
            at_us: v.at_us,
            bytes: m.bytes,
            duration_us: m.duration_us,
            throughput: m.throughput,
            rtt_us: m.rtt_us,
            base_rtt_us: m.base_rtt_us,
            bytes_per_rtt: m.bytes_per_rtt,
            advertised_window: m.advertised_window,
            receive_buffer: m.receive_buffer,
            idle_us: m.idle_us,
            held_off_us: m.held_off_us,
            server_pauses: m.server_pauses,
            server_pause_us: m.server_pause_us,
            samples: m.samples,
            round_trips: m.round_trips,
            path_bytes_per_second: v.path_bytes_per_second,
            bdp: v.bdp,
            loss: LossReport::from(&m.loss),
            summary: v.summary.clone(),
            fix: v.fix.clone(),
        }
    }
}
