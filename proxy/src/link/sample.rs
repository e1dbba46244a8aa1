//! One reading of a socket: TCP_INFO fields, buffer sizes and queues, in
//! plain numbers. Fields a kernel does not provide are `None`.

use std::io;
use std::os::fd::AsRawFd;

use serde::{Deserialize, Serialize};
use socket2::SockRef;

use crate::sys::{queued, tcp_info};

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkSample {
    /// Smoothed RTT and its variance, µs.
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub min_rtt_us: Option<u32>,
    pub snd_cwnd: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    /// What receive-buffer autotuning thinks a round trip needs.
    pub rcv_space: u32,
    pub rcv_ssthresh: u32,
    pub rcv_rtt_us: u32,
    /// Bytes/s, as the sender measured it.
    pub delivery_rate: Option<u64>,
    /// Sender-side chronographs, µs.
    pub busy_time_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub total_retrans: u32,
    /// The peer's receive window, and the one we advertise (Linux ≥ 6.2).
    pub snd_wnd: Option<u32>,
    pub rcv_wnd: Option<u32>,
    /// SO_SNDBUF / SO_RCVBUF as they stand (autotuning moves them).
    pub sndbuf: u32,
    pub rcvbuf: u32,
    /// SIOCOUTQ: sent, not yet acknowledged; SIOCINQ: received, not yet read.
    pub outq: u32,
    pub inq: u32,
}

impl LinkSample {
    /// The window we advertise: the kernel's own figure when it reports
    /// one, else the window clamp it is growing towards.
    pub fn advertised_window(&self) -> u32 {
        self.rcv_wnd.unwrap_or(self.rcv_ssthresh)
    }

    /// The path's base RTT: minimum seen, else the smoothed one.
    pub fn base_rtt_us(&self) -> u32 {
        self.min_rtt_us.filter(|&m| m > 0).unwrap_or(self.rtt_us)
    }
}

pub fn sample<S: AsRawFd>(socket: &S) -> io::Result<LinkSample>
where
    for<'a> SockRef<'a>: From<&'a S>,
{
    let info = tcp_info(socket)?;
    let r = &info.raw;
    let sock = SockRef::from(socket);
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
        snd_wnd: info.has_windows().then_some(r.snd_wnd),
        rcv_wnd: info.has_windows().then_some(r.rcv_wnd),
        sndbuf: sock.send_buffer_size().map_or(0, |v| v as u32),
        rcvbuf: sock.recv_buffer_size().map_or(0, |v| v as u32),
        outq,
        inq,
    })
}
