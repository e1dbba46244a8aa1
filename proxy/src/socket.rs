//! One reading of a TCP socket as the kernel sees it: TCP_INFO fields,
//! buffer sizes and queues, in plain numbers (fields a kernel does not
//! provide are `None`). A leaf: the link probe takes the readings, the
//! recorder and the live view receive them.

use std::io;
use std::os::fd::AsRawFd;

use serde::{Deserialize, Serialize};
use socket2::SockRef;

use crate::sys::{queued, receive_memory, tcp_info};

/// One reading of a socket (the one to the server, or a client's); recorded, so fields added
/// later carry `#[serde(default)]` to read older recordings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkSample {
    /// Smoothed RTT and its variance, µs.
    pub rtt_us: u32,
    /// `tcpi_rttvar`: RTT mean deviation, µs.
    pub rttvar_us: u32,
    /// `tcpi_min_rtt`, µs; `None` on kernels without it.
    pub min_rtt_us: Option<u32>,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Send MSS, payload bytes per segment.
    pub snd_mss: u32,
    /// The kernel's estimate of the peer's MSS, bytes.
    pub rcv_mss: u32,
    /// What receive-buffer autotuning thinks a round trip needs.
    pub rcv_space: u32,
    /// The clamp the advertised receive window grows towards, bytes.
    pub rcv_ssthresh: u32,
    /// Receiver-side RTT estimate autotuning uses, µs; 0 until measured.
    pub rcv_rtt_us: u32,
    /// Bytes/s, as the sender measured it.
    pub delivery_rate: Option<u64>,
    /// Sender-side chronographs, µs.
    pub busy_time_us: Option<u64>,
    /// Time sending was stalled by the peer's receive window, µs; `None` before Linux 4.10.
    pub rwnd_limited_us: Option<u64>,
    /// Time sending was stalled by our send buffer, µs; `None` before Linux 4.10.
    pub sndbuf_limited_us: Option<u64>,
    /// Payload bytes the peer acknowledged, ever.
    pub bytes_acked: u64,
    /// Payload bytes received in order, ever.
    pub bytes_received: u64,
    /// Segments rttscope retransmitted on this socket, ever (what it sends: queries, uploads).
    pub total_retrans: u32,
    /// Segments rttscope currently counts as lost, and its retransmission timeout, µs.
    #[serde(default)]
    pub lost: u32,
    /// `tcpi_rto`: the current retransmission timeout, µs.
    #[serde(default)]
    pub rto_us: u32,
    /// Unanswered zero-window or keepalive probes right now.
    #[serde(default)]
    pub probes: u8,
    /// Retransmission timeouts ever (Linux ≥ 6.7).
    #[serde(default)]
    pub total_rto: Option<u16>,
    /// `tcpi_total_rto_time`: ms spent in RTO recoveries, an unfinished one included.
    #[serde(default)]
    pub total_rto_time_ms: Option<u32>,
    /// Segments the server reported receiving twice (DSACK), and reorderings it showed us
    /// (Linux ≥ 4.19): duplication or needless retransmission of what rttscope sent.
    #[serde(default)]
    pub dsack_dups: Option<u32>,
    /// `tcpi_reord_seen`: reorderings of our segments detected from the peer's ACKs.
    #[serde(default)]
    pub reord_seen: Option<u32>,
    /// Segments from the server that arrived out of order, ahead of a hole: every loss (and
    /// every reordering) of what the server sends shows here first (Linux ≥ 5.4).
    #[serde(default)]
    pub rcv_ooopack: Option<u32>,
    /// Data segments received and sent, retransmissions and duplicates included.
    #[serde(default)]
    pub data_segs_in: Option<u32>,
    /// `tcpi_data_segs_out`: data segments sent, retransmissions included.
    #[serde(default)]
    pub data_segs_out: Option<u32>,
    /// Segments received and thrown away: duplicates of data already had (and, rarely,
    /// segments dropped for want of receive memory).
    #[serde(default)]
    pub dropped: Option<u32>,
    /// The peer's receive window, and the one we advertise (Linux ≥ 6.2).
    pub snd_wnd: Option<u32>,
    /// `tcpi_rcv_wnd`: the window we advertise, bytes; `None` before Linux 6.2.
    pub rcv_wnd: Option<u32>,
    /// SO_SNDBUF / SO_RCVBUF as they stand (autotuning moves them).
    pub sndbuf: u32,
    /// `SO_RCVBUF`, bytes, as getsockopt reports it (the kernel's doubled figure).
    pub rcvbuf: u32,
    /// SIOCOUTQ: sent, not yet acknowledged; SIOCINQ: received, not yet read.
    pub outq: u32,
    /// `SIOCINQ`: bytes received and not yet read.
    pub inq: u32,
    /// Memory the socket held for received data (`SO_MEMINFO`'s `SK_MEMINFO_RMEM_ALLOC`),
    /// read just before `inq`: with nothing unread, what waits out of order behind a hole.
    #[serde(default)]
    pub rmem_alloc: Option<u32>,
}

impl LinkSample {
    /// The window we advertise: the kernel's own figure when it reports
    /// one, else the window clamp it is growing towards.
    pub fn advertised_window(&self) -> u32 {
        self.rcv_wnd.unwrap_or(self.rcv_ssthresh)
    }

    /// Whether segments waited out of order behind a hole at this reading: the socket held
    /// received data while nothing was left to read in order.
    pub fn hole_open(&self) -> bool {
        self.inq == 0 && self.rmem_alloc.is_some_and(|held| held > 0)
    }

    /// The path's base RTT: minimum seen, else the smoothed one.
    pub fn base_rtt_us(&self) -> u32 {
        self.min_rtt_us.filter(|&m| m > 0).unwrap_or(self.rtt_us)
    }
}

/// The socket's loss and reordering counters at one reading (each counts since the socket opened).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LossCounters {
    /// Segments rttscope retransmitted.
    pub retransmitted: u32,
    /// Retransmission timeouts rttscope's side took (Linux ≥ 6.7; else 0).
    pub rtos: u32,
    /// Segments from the server that arrived behind a hole.
    pub out_of_order: u32,
    /// Data segments received, duplicates included.
    pub segments_in: u32,
    /// Payload bytes received in order: divided by the MSS, how many segments the data needed.
    pub bytes_received: u64,
    /// Segments the server said it got twice.
    pub dsack_dups: u32,
    /// Reorderings of rttscope's segments the server's ACKs revealed.
    pub reord_seen: u32,
    /// Segments received and thrown away as already had: duplicates. `None` from the
    /// one-`TCP_INFO` reading at a response's end, which does not ask.
    pub dropped: Option<u32>,
    /// Not the kernel's: gaps in the middle of a response as long as a retransmission
    /// timeout, as the link probe saw its reads stop (a lost last segment leaves no other trace).
    pub timeout_gaps: u32,
}

impl LossCounters {
    /// The counters out of a full [`sample`]; `timeout_gaps` starts at 0 for the link probe to
    /// fill.
    pub fn of(s: &LinkSample) -> LossCounters {
        LossCounters {
            retransmitted: s.total_retrans,
            rtos: s.total_rto.map_or(0, u32::from),
            out_of_order: s.rcv_ooopack.unwrap_or(0),
            segments_in: s.data_segs_in.unwrap_or(0),
            bytes_received: s.bytes_received,
            dsack_dups: s.dsack_dups.unwrap_or(0),
            reord_seen: s.reord_seen.unwrap_or(0),
            dropped: s.dropped,
            timeout_gaps: 0,
        }
    }

    /// What moved between `earlier` and this reading (the kernel's counters wrap).
    pub fn since(&self, earlier: &LossCounters) -> LossCounters {
        LossCounters {
            retransmitted: self.retransmitted.wrapping_sub(earlier.retransmitted),
            rtos: self.rtos.wrapping_sub(earlier.rtos),
            out_of_order: self.out_of_order.wrapping_sub(earlier.out_of_order),
            segments_in: self.segments_in.wrapping_sub(earlier.segments_in),
            bytes_received: self.bytes_received.wrapping_sub(earlier.bytes_received),
            dsack_dups: self.dsack_dups.wrapping_sub(earlier.dsack_dups),
            reord_seen: self.reord_seen.wrapping_sub(earlier.reord_seen),
            dropped: self.dropped.zip(earlier.dropped).map(|(now, then)| now.wrapping_sub(then)),
            timeout_gaps: self.timeout_gaps.wrapping_sub(earlier.timeout_gaps),
        }
    }

    /// Whether a segment either way was sent again or arrived behind a hole: what a command
    /// waiting on this socket would have waited for.
    pub fn retransmission_moved(&self, earlier: &LossCounters) -> bool {
        let d = self.since(earlier);
        d.retransmitted > 0 || d.out_of_order > 0 || d.timeout_gaps > 0
    }
}

/// The loss counters alone: one `TCP_INFO` read, cheap enough for every response's end.
pub fn loss_counters(socket: &impl AsRawFd) -> io::Result<LossCounters> {
    let info = tcp_info(socket)?;
    let r = &info.raw;
    Ok(LossCounters {
        retransmitted: r.total_retrans,
        rtos: if info.has_rto_totals() { u32::from(r.total_rto) } else { 0 },
        out_of_order: if info.has_reordering_counts() { r.rcv_ooopack } else { 0 },
        segments_in: if info.has_data_segs() { r.data_segs_in } else { 0 },
        bytes_received: r.bytes_received,
        dsack_dups: if info.has_reordering_counts() { r.dsack_dups } else { 0 },
        reord_seen: if info.has_reordering_counts() { r.reord_seen } else { 0 },
        dropped: None,
        timeout_gaps: 0,
    })
}

/// A full reading: `TCP_INFO`, `SO_MEMINFO` drops, `SIOCOUTQ`/`SIOCINQ` and both buffer sizes
/// (several syscalls; [`loss_counters`] is the cheap one).
pub fn sample<S: AsRawFd>(socket: &S) -> io::Result<LinkSample>
where
    for<'a> SockRef<'a>: From<&'a S>,
{
    let info = tcp_info(socket)?;
    let r = &info.raw;
    let sock = SockRef::from(socket);
    // Before the queue: bytes arriving in order between the two readings then show as
    // unread, never as memory held out of order.
    let memory = receive_memory(socket);
    let (outq, inq) = queued(socket)?;
    Ok(LinkSample {
        rtt_us: r.rtt,
        rttvar_us: r.rttvar,
        min_rtt_us: info.has_min_rtt().then_some(r.min_rtt),
        snd_cwnd: r.snd_cwnd,
        snd_mss: r.snd_mss,
        rcv_mss: r.rcv_mss,
        rcv_space: r.rcv_space,
        rcv_ssthresh: r.rcv_ssthresh,
        rcv_rtt_us: r.rcv_rtt,
        delivery_rate: info.has_delivery_rate().then_some(r.delivery_rate),
        busy_time_us: info.has_limit_timers().then_some(r.busy_time),
        rwnd_limited_us: info.has_limit_timers().then_some(r.rwnd_limited),
        sndbuf_limited_us: info.has_limit_timers().then_some(r.sndbuf_limited),
        bytes_acked: r.bytes_acked,
        bytes_received: r.bytes_received,
        total_retrans: r.total_retrans,
        lost: r.lost,
        rto_us: r.rto,
        probes: r.probes,
        total_rto: info.has_rto_totals().then_some(r.total_rto),
        total_rto_time_ms: info.has_rto_totals().then_some(r.total_rto_time),
        dsack_dups: info.has_reordering_counts().then_some(r.dsack_dups),
        reord_seen: info.has_reordering_counts().then_some(r.reord_seen),
        rcv_ooopack: info.has_reordering_counts().then_some(r.rcv_ooopack),
        data_segs_in: info.has_data_segs().then_some(r.data_segs_in),
        data_segs_out: info.has_data_segs().then_some(r.data_segs_out),
        dropped: memory.and_then(|m| m.dropped),
        rmem_alloc: memory.map(|m| m.allocated),
        snd_wnd: info.has_windows().then_some(r.snd_wnd),
        rcv_wnd: info.has_windows().then_some(r.rcv_wnd),
        sndbuf: sock.send_buffer_size().map_or(0, |v| v as u32),
        rcvbuf: sock.recv_buffer_size().map_or(0, |v| v as u32),
        outq,
        inq,
    })
}
