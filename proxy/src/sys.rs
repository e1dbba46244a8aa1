//! System calls the standard library does not wrap: the kernel's view of a
//! TCP socket (`getsockopt(TCP_INFO)`, `SO_MEMINFO`, `SIOCOUTQ`/`SIOCINQ`) and a thread's
//! timer slack. The only `unsafe` in rttscope.
//!
//! `struct tcp_info` only ever grows at its end, and the kernel copies
//! `min(ours, its own)` bytes and reports that length: a field is valid only
//! if the returned length covers it. Never assume a kernel version.

#![allow(unsafe_code)]

use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, RawFd};

/// `struct tcp_info` up to `tcpi_total_rto_time` (Linux 6.7), in the
/// kernel's layout (uapi `linux/tcp.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpInfoRaw {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    /// `snd_wscale:4, rcv_wscale:4`.
    pub wscale: u8,
    pub flags: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub rehash: u32,
    pub total_rto: u16,
    pub total_rto_recoveries: u16,
    pub total_rto_time: u32,
}

/// `TCP_INFO` and how many of its bytes the kernel filled.
pub struct TcpInfo {
    pub raw: TcpInfoRaw,
    pub len: usize,
}

impl TcpInfo {
    /// Whether the kernel filled the field that starts at `offset` and is `size` long.
    pub fn has(&self, offset: usize, size: usize) -> bool {
        self.len >= offset + size
    }

    pub fn has_windows(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, rcv_wnd), 4)
    }

    pub fn has_limit_timers(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, sndbuf_limited), 8)
    }

    pub fn has_delivery_rate(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, delivery_rate), 8)
    }

    pub fn has_min_rtt(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, min_rtt), 4)
    }

    pub fn has_data_segs(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, data_segs_out), 4)
    }

    /// `dsack_dups` and `reord_seen` (Linux 5.4), `rcv_ooopack` (5.4).
    pub fn has_reordering_counts(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, rcv_ooopack), 4)
    }

    /// `total_rto`, `total_rto_recoveries`, `total_rto_time` (Linux 6.7).
    pub fn has_rto_totals(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, total_rto_time), 4)
    }
}

pub fn tcp_info(socket: &impl AsRawFd) -> io::Result<TcpInfo> {
    let fd: RawFd = socket.as_raw_fd();
    let mut raw = TcpInfoRaw::default();
    let mut len = size_of::<TcpInfoRaw>() as libc::socklen_t;
    // SAFETY: `raw` is a plain-data repr(C) struct we own, `len` is its size;
    // the kernel writes at most `len` bytes into it and stores the count in
    // `len`. `fd` is borrowed from a live socket for the duration of the call.
    let rc = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&raw mut raw).cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpInfo { raw, len: len as usize })
}

/// Segments the socket received and threw away (`SO_MEMINFO`'s `SK_MEMINFO_DROPS`): on a
/// TCP socket, data it already had — duplicates and needless retransmissions — and, rarely,
/// segments dropped for want of receive memory. `None` where the kernel does not report it.
pub fn dropped(socket: &impl AsRawFd) -> Option<u32> {
    let fd = socket.as_raw_fd();
    let mut meminfo = [0u32; libc::SK_MEMINFO_DROPS as usize + 2];
    let mut len = size_of_val(&meminfo) as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into the array we own and stores the
    // count in `len`; `fd` is borrowed from a live socket for the duration of the call.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_MEMINFO, meminfo.as_mut_ptr().cast(), &mut len) };
    let covered = (len as usize) / size_of::<u32>() > libc::SK_MEMINFO_DROPS as usize;
    (rc == 0 && covered).then_some(meminfo[libc::SK_MEMINFO_DROPS as usize])
}

/// Bytes in the socket's send queue not yet acknowledged (`SIOCOUTQ`) and
/// received but not yet read (`SIOCINQ`).
pub fn queued(socket: &impl AsRawFd) -> io::Result<(u32, u32)> {
    let fd = socket.as_raw_fd();
    let mut outq: libc::c_int = 0;
    let mut inq: libc::c_int = 0;
    // SAFETY: both ioctls write one c_int through the pointer we pass, which
    // points at a c_int we own; `fd` is a live socket.
    let (a, b) = unsafe { (libc::ioctl(fd, libc::TIOCOUTQ, &mut outq), libc::ioctl(fd, libc::FIONREAD, &mut inq)) };
    if a != 0 || b != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((outq.max(0) as u32, inq.max(0) as u32))
}

/// Asks the kernel to wake this thread within `slack` of the time it asked
/// for (the default, 50 µs, would blur sub-millisecond emulated delays).
pub fn set_timer_slack(slack: std::time::Duration) {
    let ns = libc::c_ulong::try_from(slack.as_nanos()).unwrap_or(libc::c_ulong::MAX).max(1);
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches only
    // the calling thread's scheduling attributes.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0) };
    if rc != 0 {
        tracing::debug!(error = %io::Error::last_os_error(), "cannot set timer slack");
    }
}

/// The open-file limit: `(soft, hard)`.
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// Raises the soft open-file limit to the hard one (no privilege needed); returns the new
/// `(soft, hard)`.
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    let (soft, hard) = nofile_limit()?;
    if soft < hard {
        let limit = libc::rlimit { rlim_cur: hard, rlim_max: hard };
        // SAFETY: setrlimit reads one rlimit from a struct we own; raising the soft limit up
        // to the hard one is always allowed.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    nofile_limit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_kernel_abi() {
        // Offsets from linux/tcp.h; the kernel ABI only appends.
        assert_eq!(offset_of!(TcpInfoRaw, rcv_space), 96);
        assert_eq!(offset_of!(TcpInfoRaw, bytes_received), 128);
        assert_eq!(offset_of!(TcpInfoRaw, min_rtt), 148);
        assert_eq!(offset_of!(TcpInfoRaw, delivery_rate), 160);
        assert_eq!(offset_of!(TcpInfoRaw, sndbuf_limited), 184);
        assert_eq!(offset_of!(TcpInfoRaw, bytes_retrans), 208);
        assert_eq!(offset_of!(TcpInfoRaw, snd_wnd), 228);
        assert_eq!(offset_of!(TcpInfoRaw, rcv_wnd), 232);
        assert_eq!(size_of::<TcpInfoRaw>(), 248);
    }

    #[test]
    fn reads_a_live_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        std::io::Write::write_all(&mut &client, &[7u8; 1000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let info = tcp_info(&server).unwrap();
        assert!(info.len >= 104, "an ancient kernel?");
        // TCP_ESTABLISHED
        assert_eq!(info.raw.state, 1);
        assert!(info.raw.bytes_received >= 1000 || !info.has(offset_of!(TcpInfoRaw, bytes_received), 8));
        let (outq, inq) = queued(&server).unwrap();
        assert_eq!((outq, inq), (0, 1000));
    }
}
