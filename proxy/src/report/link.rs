//! `links[]` in the schema: one verdict on the upstream link per large transfer (or run of
//! small responses), built from the link module's [`LinkVerdict`]s.

use serde::{Deserialize, Serialize};

use crate::link::{LinkLimit, LinkVerdict, Loss};

/// A verdict on the upstream link: the one limit that held a transfer back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkReport {
    /// The one limit that held the transfer back; `link` (the path's own bandwidth) is the good case.
    pub limit: LinkLimit,
    /// A second limit that bound at the same time (`loss` beside a window), or null.
    #[serde(default)]
    pub secondary: Option<LinkLimit>,
    /// The upstream connection, as `connections[].id`.
    pub conn_id: u64,
    /// When the transfer ended, µs on the recording's clock.
    pub at_us: u64,
    /// Response bytes the transfer moved; 0 for a `latency` verdict on small responses.
    pub bytes: u64,
    /// First read to last read, µs; for a `latency` verdict, the small responses' latencies summed.
    pub duration_us: u64,
    /// Bytes per second.
    pub throughput: u64,
    /// The kernel's smoothed RTT of the upstream socket (TCP_INFO), averaged over the transfer's
    /// readings, µs.
    pub rtt_us: u32,
    /// The smallest RTT the kernel saw during the transfer (TCP_INFO `min_rtt`), µs: what
    /// `bytes_per_rtt` is measured over.
    pub base_rtt_us: u32,
    /// Bytes delivered per round trip: the effective window.
    pub bytes_per_rtt: u64,
    /// Largest receive window rttscope advertised.
    pub advertised_window: u64,
    /// The largest `SO_RCVBUF` of the upstream socket during the transfer (autotuning moves it),
    /// bytes; 0 for `latency`.
    pub receive_buffer: u64,
    /// Time the pipe stood empty between reads for less than a round trip (a window's bursts and
    /// silences), µs; hold-offs and loss stalls not counted.
    pub idle_us: u64,
    /// From the end of the server's first loss recovery (where loss ended its slow start) to
    /// the transfer's end, µs: `duration_us` without one.
    #[serde(default)]
    pub after_first_loss_us: u64,
    /// Of `idle_us`, the time in `after_first_loss_us`, µs.
    #[serde(default)]
    pub idle_after_first_loss_us: u64,
    /// Time rttscope stopped reading upstream because the client lagged.
    pub held_off_us: u64,
    /// Of it, hold-offs after which the server's bytes still waited unread in rttscope's
    /// socket (a round trip's worth and more, at least 64 KiB), µs.
    #[serde(default)]
    pub backlog_held_us: u64,
    /// The smallest receive window rttscope advertised right after it resumed reading for the
    /// client, bytes: near nothing when holding off closed the server's window.
    #[serde(default)]
    pub window_after_hold: Option<u64>,
    /// Bytes a second the server's bytes reached rttscope's socket while it held off for the
    /// client (the kernel's count at each hold-off's start and end): near the transfer's pace
    /// or above, the server kept sending; far under it, the server slowed with the client.
    #[serde(default)]
    pub pace_while_held: Option<u64>,
    /// Bytes a second the application took while it was behind: what its socket acknowledged
    /// while rttscope held off for it (the kernel's count at each hold-off's start and end).
    #[serde(default)]
    pub reader_pace: Option<u64>,
    /// Time rttscope went on passing the response to the client after the server's last byte of
    /// it had arrived, µs, to a reading's resolution (`link.sample_interval`).
    #[serde(default)]
    pub reader_tail_us: u64,
    /// Bytes of the response the application had still to take when the server's last byte
    /// of it reached rttscope (what rttscope had written to the client's socket and the client
    /// had not acknowledged); `null` where not read.
    #[serde(default)]
    pub client_unread_at_end: Option<u64>,
    /// Gaps of several RTTs between reads with nothing in flight: the server producing the result
    /// slowly.
    pub server_pauses: u32,
    /// Those pauses' time together, µs.
    pub server_pause_us: u64,
    /// TCP_INFO readings of the upstream socket behind the verdict; 0 for `latency`.
    pub samples: u32,
    /// Round trips of the response, or of the thousand small responses a `latency` verdict judges.
    pub round_trips: u64,
    /// Time the emulated link (`inject`) held the transfer, µs; 0 without one. Most of the
    /// transfer's time: the verdict is the emulation's.
    #[serde(default)]
    pub emulated_us: u64,
    /// Fastest delivery seen on this upstream, or the configured bandwidth (bytes per second).
    pub path_bytes_per_second: Option<u64>,
    /// Bandwidth-delay product of that path, bytes.
    pub bdp: Option<u64>,
    /// Loss, duplication and reordering seen during the transfer: the link module's own
    /// [`Loss`], which documents its fields.
    #[serde(default)]
    pub loss: Loss,
    /// The verdict in a sentence, for the renderings and `SHOW RTTSCOPE LINK`.
    pub summary: String,
    /// What to change, sized from the measured RTT and bandwidth.
    pub fix: String,
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
        // Copied, not `#[serde(flatten)]`ed: flattening would write the measurement's keys in
        // one run and move `conn_id`, `at_us` and `loss` within each `links[]` entry.
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
            after_first_loss_us: m.after_first_loss_us,
            idle_after_first_loss_us: m.idle_after_first_loss_us,
            held_off_us: m.held_off_us,
            backlog_held_us: m.backlog_held_us,
            window_after_hold: m.window_after_hold,
            pace_while_held: m.pace_while_held(),
            reader_pace: m.reader_pace(),
            reader_tail_us: m.reader_tail_us,
            client_unread_at_end: m.client_unread_at_end,
            server_pauses: m.server_pauses,
            server_pause_us: m.server_pause_us,
            samples: m.samples,
            round_trips: m.round_trips,
            emulated_us: m.emulated_us,
            path_bytes_per_second: v.path_bytes_per_second,
            bdp: v.bdp,
            loss: m.loss,
            summary: v.summary.clone(),
            fix: v.fix.clone(),
        }
    }
}
