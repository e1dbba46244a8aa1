//! System calls the standard library does not wrap: the kernel's view of a
//! TCP socket (`getsockopt(TCP_INFO)`, `SO_MEMINFO`, `SIOCOUTQ`/`SIOCINQ`), a thread's
//! timer slack and scheduling policy, the open-file limit, and the allocator's count and
//! trimming of the heap; and the forwarding path's writes to a plain socket, made as a bare
//! system call.
//! The only `unsafe` in rttscope.
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
    /// `tcpi_state`: the kernel's `TCP_*` state (`include/net/tcp_states.h`), 1 =
    /// `TCP_ESTABLISHED`.
    pub state: u8,
    /// `tcpi_ca_state`: congestion-control state, `TCP_CA_Open` (0) … `TCP_CA_Loss` (4).
    pub ca_state: u8,
    /// `tcpi_retransmits`: consecutive RTO retransmissions of the oldest unacked segment, reset
    /// when it is acked.
    pub retransmits: u8,
    /// `tcpi_probes`: zero-window or keepalive probes sent and not yet answered.
    pub probes: u8,
    /// `tcpi_backoff`: exponential RTO backoff exponent (the RTO is doubled this many times).
    pub backoff: u8,
    /// `tcpi_options`: `TCPI_OPT_*` bits negotiated at SYN (timestamps, SACK, window scaling, ECN,
    /// …).
    pub options: u8,
    /// `snd_wscale:4, rcv_wscale:4`.
    pub wscale: u8,
    /// `tcpi_delivery_rate_app_limited:1, tcpi_fastopen_client_fail:2` bit-fields.
    pub flags: u8,
    /// `tcpi_rto`: current retransmission timeout, µs.
    pub rto: u32,
    /// `tcpi_ato`: delayed-ACK timeout, µs.
    pub ato: u32,
    /// `tcpi_snd_mss`: current send MSS, bytes of payload per segment.
    pub snd_mss: u32,
    /// `tcpi_rcv_mss`: the kernel's estimate of the peer's MSS, bytes.
    pub rcv_mss: u32,
    /// `tcpi_unacked`: segments in flight (`packets_out`); on a listener, the accept-queue length.
    pub unacked: u32,
    /// `tcpi_sacked`: in-flight segments the peer SACKed; on a listener, the accept backlog.
    pub sacked: u32,
    /// `tcpi_lost`: in-flight segments currently presumed lost.
    pub lost: u32,
    /// `tcpi_retrans`: retransmitted segments not yet acknowledged.
    pub retrans: u32,
    /// `tcpi_fackets`: always 0 since Linux 4.15 removed FACK; kept for the layout.
    pub fackets: u32,
    /// `tcpi_last_data_sent`: ms since the last data segment was sent.
    pub last_data_sent: u32,
    /// `tcpi_last_ack_sent`: always 0 (the kernel does not track it); kept for the layout.
    pub last_ack_sent: u32,
    /// `tcpi_last_data_recv`: ms since the last data segment was received.
    pub last_data_recv: u32,
    /// `tcpi_last_ack_recv`: ms since the last ACK was received.
    pub last_ack_recv: u32,
    /// `tcpi_pmtu`: path MTU, bytes.
    pub pmtu: u32,
    /// `tcpi_rcv_ssthresh`: the clamp the advertised receive window grows towards, bytes.
    pub rcv_ssthresh: u32,
    /// `tcpi_rtt`: smoothed RTT (SRTT), µs.
    pub rtt: u32,
    /// `tcpi_rttvar`: RTT mean deviation (RTTVAR), µs.
    pub rttvar: u32,
    /// `tcpi_snd_ssthresh`: slow-start threshold, segments.
    pub snd_ssthresh: u32,
    /// `tcpi_snd_cwnd`: congestion window, segments.
    pub snd_cwnd: u32,
    /// `tcpi_advmss`: MSS advertised to the peer, bytes.
    pub advmss: u32,
    /// `tcpi_reordering`: reordering distance the sender tolerates before calling a segment lost,
    /// segments.
    pub reordering: u32,
    /// `tcpi_rcv_rtt`: receiver-side RTT estimate used by receive-buffer autotuning, µs; 0 until
    /// measured.
    pub rcv_rtt: u32,
    /// `tcpi_rcv_space`: bytes receive-buffer autotuning estimates one round trip needs.
    pub rcv_space: u32,
    /// `tcpi_total_retrans`: segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// `tcpi_pacing_rate`: current pacing rate, bytes/s.
    pub pacing_rate: u64,
    /// `tcpi_max_pacing_rate`: `SO_MAX_PACING_RATE`, bytes/s; `u64::MAX` when unset.
    pub max_pacing_rate: u64,
    /// `tcpi_bytes_acked`: payload bytes the peer acknowledged (RFC 4898
    /// `tcpEStatsAppHCThruOctetsAcked`).
    pub bytes_acked: u64,
    /// `tcpi_bytes_received`: payload bytes received in order (RFC 4898
    /// `tcpEStatsAppHCThruOctetsReceived`).
    pub bytes_received: u64,
    /// `tcpi_segs_out`: segments sent, pure ACKs and retransmissions included.
    pub segs_out: u32,
    /// `tcpi_segs_in`: segments received, pure ACKs and duplicates included.
    pub segs_in: u32,
    /// `tcpi_notsent_bytes`: bytes written to the socket but not yet sent.
    pub notsent_bytes: u32,
    /// `tcpi_min_rtt`: windowed minimum RTT, µs; `u32::MAX` before the first sample.
    pub min_rtt: u32,
    /// `tcpi_data_segs_in`: segments received that carried data, duplicates included.
    pub data_segs_in: u32,
    /// `tcpi_data_segs_out`: segments sent that carried data, retransmissions included.
    pub data_segs_out: u32,
    /// `tcpi_delivery_rate`: most recent delivery-rate sample, bytes/s (Linux 4.9).
    pub delivery_rate: u64,
    /// `tcpi_busy_time`: time with data in flight, µs (Linux 4.10).
    pub busy_time: u64,
    /// `tcpi_rwnd_limited`: time sending was stalled by the peer's receive window, µs.
    pub rwnd_limited: u64,
    /// `tcpi_sndbuf_limited`: time sending was stalled by our send buffer, µs.
    pub sndbuf_limited: u64,
    /// `tcpi_delivered`: segments delivered to the peer, retransmissions included.
    pub delivered: u32,
    /// `tcpi_delivered_ce`: delivered segments the peer echoed as ECN CE-marked.
    pub delivered_ce: u32,
    /// `tcpi_bytes_sent`: payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// `tcpi_bytes_retrans`: payload bytes retransmitted.
    pub bytes_retrans: u64,
    /// `tcpi_dsack_dups`: segments the peer reported, by DSACK, as received twice.
    pub dsack_dups: u32,
    /// `tcpi_reord_seen`: reordering events the sender detected from the peer's ACKs.
    pub reord_seen: u32,
    /// `tcpi_rcv_ooopack`: segments received out of order, ahead of a hole.
    pub rcv_ooopack: u32,
    /// `tcpi_snd_wnd`: the peer's advertised receive window after scaling, bytes.
    pub snd_wnd: u32,
    /// `tcpi_rcv_wnd`: our advertised receive window after scaling, bytes (Linux 6.2).
    pub rcv_wnd: u32,
    /// `tcpi_rehash`: path rehash attempts after PLB or RTO timeouts (Linux 6.2).
    pub rehash: u32,
    /// `tcpi_total_rto`: RTO timeouts ever, SYN/SYN-ACK and recurring ones included.
    pub total_rto: u16,
    /// `tcpi_total_rto_recoveries`: RTO recoveries entered, an unfinished one included.
    pub total_rto_recoveries: u16,
    /// `tcpi_total_rto_time`: time spent in RTO recoveries, ms (not µs), an unfinished one
    /// included.
    pub total_rto_time: u32,
}

/// `TCP_INFO` and how many of its bytes the kernel filled.
pub struct TcpInfo {
    /// The struct as filled; fields past [`Self::len`] are left zeroed, not read.
    pub raw: TcpInfoRaw,
    /// Bytes the kernel wrote (getsockopt's `optlen`): older kernels stop short of the end.
    pub len: usize,
}

impl TcpInfo {
    /// Whether the kernel filled the field that starts at `offset` and is `size` long.
    pub fn has(&self, offset: usize, size: usize) -> bool {
        self.len >= offset + size
    }

    /// `snd_wnd` and `rcv_wnd` (Linux 6.2), judged by `rcv_wnd`, the later of the two.
    pub fn has_windows(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, rcv_wnd), 4)
    }

    /// `busy_time`, `rwnd_limited`, `sndbuf_limited` (Linux 4.10).
    pub fn has_limit_timers(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, sndbuf_limited), 8)
    }

    /// `delivery_rate` (Linux 4.9).
    pub fn has_delivery_rate(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, delivery_rate), 8)
    }

    /// `min_rtt`; without it there is only the smoothed `rtt`.
    pub fn has_min_rtt(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, min_rtt), 4)
    }

    /// `data_segs_in` and `data_segs_out`, judged by the later one.
    pub fn has_data_segs(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, data_segs_out), 4)
    }

    /// `dsack_dups` and `reord_seen` (Linux 4.19), `rcv_ooopack` (5.4).
    pub fn has_reordering_counts(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, rcv_ooopack), 4)
    }

    /// `total_rto`, `total_rto_recoveries`, `total_rto_time` (Linux 6.7).
    pub fn has_rto_totals(&self) -> bool {
        self.has(offset_of!(TcpInfoRaw, total_rto_time), 4)
    }
}

/// `getsockopt(IPPROTO_TCP, TCP_INFO)`: one syscall, no allocation.
pub fn tcp_info(socket: &impl AsRawFd) -> io::Result<TcpInfo> {
    let fd: RawFd = socket.as_raw_fd();
    // Not zeroed first (some 250 bytes, at every response's end): the kernel fills what it
    // knows, and only the rest is zeroed after.
    let mut raw = std::mem::MaybeUninit::<TcpInfoRaw>::uninit();
    let size = size_of::<TcpInfoRaw>();
    let mut len = size as libc::socklen_t;
    // SAFETY: `raw` is space for a plain-data repr(C) struct we own, `len` is its size;
    // the kernel writes at most `len` bytes into it and stores the count in `len`. `fd` is
    // borrowed from a live socket for the duration of the call.
    let rc = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, raw.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let filled = (len as usize).min(size);
    // SAFETY: the kernel wrote the first `filled` bytes; the rest, zeroed here, is within
    // the struct. Every field is an integer, for which any bytes are a value.
    let raw = unsafe {
        raw.as_mut_ptr().cast::<u8>().add(filled).write_bytes(0, size - filled);
        raw.assume_init()
    };
    Ok(TcpInfo { raw, len: filled })
}

/// What `SO_MEMINFO` says of a socket's receive side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiveMemory {
    /// `SK_MEMINFO_RMEM_ALLOC`: memory the socket holds for received data — its receive queue
    /// and, on TCP, the segments waiting out of order behind a hole.
    pub allocated: u32,
    /// `SK_MEMINFO_DROPS`: segments received and thrown away — on a TCP socket data it already
    /// had (duplicates, needless retransmissions) and, rarely, segments dropped for want of
    /// receive memory.
    pub dropped: Option<u32>,
}

/// The socket's receive memory (`SO_MEMINFO`); `None` where the kernel does not report it.
pub fn receive_memory(socket: &impl AsRawFd) -> Option<ReceiveMemory> {
    let fd = socket.as_raw_fd();
    let mut meminfo = [0u32; libc::SK_MEMINFO_DROPS as usize + 2];
    let mut len = size_of_val(&meminfo) as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into the array we own and stores the
    // count in `len`; `fd` is borrowed from a live socket for the duration of the call.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_MEMINFO, meminfo.as_mut_ptr().cast(), &mut len) };
    let words = (len as usize) / size_of::<u32>();
    (rc == 0 && words > libc::SK_MEMINFO_RMEM_ALLOC as usize).then(|| ReceiveMemory {
        allocated: meminfo[libc::SK_MEMINFO_RMEM_ALLOC as usize],
        dropped: (words > libc::SK_MEMINFO_DROPS as usize).then_some(meminfo[libc::SK_MEMINFO_DROPS as usize]),
    })
}

/// Bytes in the socket's send queue not yet acknowledged (`SIOCOUTQ`) and
/// received but not yet read (`SIOCINQ`).
pub fn queued(socket: &impl AsRawFd) -> io::Result<(u32, u32)> {
    Ok((unsent(socket)?, socket_count(socket, libc::FIONREAD)?))
}

/// Bytes written to `socket` and not yet acknowledged by its peer (`SIOCOUTQ`): one ioctl
/// where [`queued`] makes two.
pub fn unsent(socket: &impl AsRawFd) -> io::Result<u32> {
    socket_count(socket, libc::TIOCOUTQ)
}

/// A socket's byte count that the ioctl `request` reads (`SIOCOUTQ`, `SIOCINQ`).
fn socket_count(socket: &impl AsRawFd, request: libc::Ioctl) -> io::Result<u32> {
    let mut count: libc::c_int = 0;
    // SAFETY: both requests write one c_int through the pointer we pass, which points at a
    // c_int we own; the fd is a live socket.
    if unsafe { libc::ioctl(socket.as_raw_fd(), request, &mut count) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(count.max(0) as u32)
}

/// `send(fd, buf, MSG_NOSIGNAL)` as a bare system call, as std's `write` of a socket makes
/// it (a peer gone is `EPIPE`, never a `SIGPIPE`) but without glibc's wrapper: `send` is a
/// thread cancellation point, which marks the thread cancellable and back around every
/// call, about 30 instructions of the 60 a write costs in user space (callgrind,
/// `scripts/bench.sh --only f`); rttscope never cancels a thread, and `syscall` is not a
/// cancellation point. Every argument goes as a full register (`c_long`, pointers,
/// `usize`): through C varargs a 32-bit integer's upper half would be undefined. A full
/// socket is `ErrorKind::WouldBlock`, as std's.
///
/// Reads keep tokio's `poll_read`: the same trick there would need tokio's readiness
/// clearing after a short read, which only its own read can reach (tried through
/// `try_io`: 90 instructions a round trip more, not less).
#[inline]
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the kernel reads at most `buf.len()` bytes from `buf`, borrowed for the call;
    // no address is given (null, 0); `fd` is borrowed from a live socket by the caller.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            libc::c_long::from(fd),
            buf.as_ptr(),
            buf.len(),
            libc::c_long::from(libc::MSG_NOSIGNAL),
            std::ptr::null::<libc::sockaddr>(),
            libc::c_long::from(0),
        )
    };
    usize::try_from(rc).map_err(|_| io::Error::last_os_error())
}

/// `CLOCK_MONOTONIC` in ns: the clock of `std::time::Instant`, as a plain number (through
/// the vDSO, no system call).
#[inline(always)]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: one timespec we own, written by the call; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// The CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`: user and system), or
/// `None` where the clock cannot be read. A system call, not the vDSO: for occasional reads.
pub fn thread_cpu_time() -> Option<std::time::Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: one timespec we own, written by the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    (rc == 0).then(|| std::time::Duration::new(secs, nanos))
}

/// Whether the peer of `socket` has closed it both ways (`POLLHUP`): on a Unix socket, a
/// client that closed or died, where one that only shut down its write side still reads. (A
/// TCP socket says so only after a reset; a FIN alone is the same either way.)
pub fn hung_up(socket: &impl AsRawFd) -> bool {
    let mut pollfd = libc::pollfd { fd: socket.as_raw_fd(), events: 0, revents: 0 };
    // SAFETY: one valid pollfd, a zero timeout: poll only reports the socket's state.
    let rc = unsafe { libc::poll(&mut pollfd, 1, 0) };
    rc == 1 && pollfd.revents & libc::POLLHUP != 0
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

/// The calling thread's scheduling policy as the kernel names it (`SCHED_OTHER`,
/// `SCHED_BATCH`, `SCHED_IDLE`, `SCHED_FIFO`, `SCHED_RR`, `SCHED_DEADLINE`).
pub fn scheduling_policy() -> io::Result<&'static str> {
    // SAFETY: sched_getscheduler takes a pid (0: the calling thread) and reads nothing of ours.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy == -1 {
        return Err(io::Error::last_os_error());
    }
    // The reset-on-fork flag comes back or'ed in; it is no policy of its own.
    Ok(match policy & !libc::SCHED_RESET_ON_FORK {
        libc::SCHED_OTHER => "SCHED_OTHER",
        libc::SCHED_BATCH => "SCHED_BATCH",
        libc::SCHED_IDLE => "SCHED_IDLE",
        libc::SCHED_FIFO => "SCHED_FIFO",
        libc::SCHED_RR => "SCHED_RR",
        libc::SCHED_DEADLINE => "SCHED_DEADLINE",
        _ => "an unknown policy",
    })
}

/// Moves the calling thread from the normal policy to `SCHED_BATCH`, its nice value kept;
/// no privilege needed. Only the calling thread changes (pid 0 is the caller's thread id).
pub fn use_batch_scheduling() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: one sched_param we own, read by the kernel; SCHED_BATCH takes priority 0.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Moves the calling thread back from `SCHED_BATCH` to the normal policy, its nice value
/// kept; no privilege needed (both are normal policies). Only the calling thread changes.
pub fn use_normal_scheduling() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: one sched_param we own, read by the kernel; SCHED_OTHER takes priority 0.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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

/// The C allocator's own account of the heap, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heap {
    /// Handed out and not yet freed (chunks in use plus blocks mapped on their own): what the
    /// program holds. RSS beyond it is free memory the allocator keeps resident, thread
    /// stacks and the binary itself.
    pub in_use: u64,
    /// Freed but kept by the allocator for reuse: fragmentation, or a peak not returned.
    pub free: u64,
}

/// The heap as glibc's allocator counts it (`mallinfo2`, every arena); `None` on other C
/// libraries. Takes each arena's lock in turn, so it is for a scrape, not the hot path.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn heap() -> Option<Heap> {
    // SAFETY: mallinfo2 takes no arguments and returns a struct by value.
    let info = unsafe { libc::mallinfo2() };
    Some(Heap { in_use: (info.uordblks + info.hblkhd) as u64, free: info.fordblks as u64 })
}

/// The heap as glibc's allocator counts it: not known on this C library.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn heap() -> Option<Heap> {
    None
}

/// Hands freed heap memory back to the system (`malloc_trim(0)`: every arena's free pages,
/// not only the top); true when some was. Locks each arena in turn: for a background thread.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim_heap() -> bool {
    // SAFETY: malloc_trim takes a byte count to keep and touches only the allocator's state.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Hands freed heap memory back to the system: not possible on this C library.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim_heap() -> bool {
    false
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
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn heap_counts_what_is_held() {
        const HELD: usize = 64 << 20;
        let before = heap().unwrap().in_use;
        let block = std::hint::black_box(vec![1u8; HELD]);
        let during = heap().unwrap().in_use;
        drop(block);
        let after = heap().unwrap().in_use;
        // Other tests allocate beside this one: half the block is margin enough.
        assert!(during >= before + HELD as u64 / 2, "{before} → {during}");
        assert!(after + (HELD as u64 / 2) <= during, "{during} → {after}");
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

    #[test]
    fn unsent_counts_what_a_peer_that_stopped_reading_left_on_the_sender() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, _) = listener.accept().unwrap();
        assert_eq!(unsent(&client).unwrap(), 0);
        // The peer reads nothing: once its receive buffer is full, what the client writes
        // stays on the client's side, unacknowledged.
        client.set_nonblocking(true).unwrap();
        let chunk = [7u8; 64 << 10];
        while std::io::Write::write(&mut &client, &chunk).is_ok() {}
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(unsent(&client).unwrap(), queued(&client).unwrap().0);
        assert!(unsent(&client).unwrap() > 0);
    }
}
