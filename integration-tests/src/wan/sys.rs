//! The only unsafe code of the WAN emulator: TUN ioctl, setns, eventfd, poll, scheduling and
//! `getsockopt(TCP_INFO)`.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// True when the process runs with effective uid 0 (needed for netns, TUN, sysctls).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Moves the *calling thread* into the network namespace bound at `path`
/// (e.g. `/run/netns/NAME`). Other threads of the process are unaffected, which is why
/// callers do this on a thread of their own.
pub fn enter_netns(path: &Path) -> io::Result<()> {
    let ns = File::open(path)?;
    // SAFETY: `ns` is an open fd for the duration of the call; CLONE_NEWNET asks the kernel
    // to check that it is a network namespace. setns only changes this thread's namespace.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Creates TUN device `name` (IFF_TUN | IFF_NO_PI: bare IP packets, no header) in the calling
/// thread's network namespace and returns its queue fd. The device lives as long as the fd.
pub fn open_tun(name: &str) -> io::Result<File> {
    let file = std::fs::OpenOptions::new().read(true).write(true).open("/dev/net/tun")?;
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "interface name too long"));
    }
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes a `struct ifreq`, which `req` is, and which outlives
    // the call; the fd is open.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// An eventfd used to wake a thread blocked in [`poll_two`].
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd has no memory preconditions; a non-negative result is a new fd we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Signals an eventfd (adds 1 to its counter), waking every poller.
pub fn eventfd_signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an open eventfd. A failure (counter overflow)
    // leaves it readable anyway, which is all a wakeup needs.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Blocks until `data` or `wake` is readable. Returns `true` when `data` is readable,
/// `false` when woken (or on a poll error other than EINTR, so callers stop rather than spin).
pub fn poll_two(data: &File, wake: &OwnedFd) -> bool {
    let mut fds = [
        libc::pollfd { fd: data.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: wake.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ];
    loop {
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if rc < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        if fds[1].revents != 0 {
            return false;
        }
        if fds[0].revents & libc::POLLIN != 0 {
            return true;
        }
        if fds[0].revents != 0 {
            // POLLERR/POLLHUP without data: the device is gone.
            return false;
        }
    }
}

/// Makes the calling thread a SCHED_FIFO real-time thread at `priority`, so it is woken ahead
/// of ordinary work when a packet arrives or a deadline falls due. Returns false when refused
/// (no CAP_SYS_NICE, or an RT-throttled cgroup); callers carry on at normal priority.
/// Also drops the thread's timer slack to 1 ns either way: the default 50 µs slack would eat
/// a fifth of the timing budget.
pub fn try_realtime(priority: i32) -> bool {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: pid 0 means the calling thread; `param` is a valid sched_param for the call.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// True when `pid` names a live process (or one we may not signal, which is also alive).
pub fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        // 0 and negatives address process groups, not a process: treat as not an owner.
        return false;
    }
    // SAFETY: signal 0 performs only the existence and permission checks; nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// `struct tcp_info` (uapi `linux/tcp.h`) up to `tcpi_rcv_ooopack` (Linux 5.4). The struct
/// only ever grows at its end; the kernel copies `min(ours, its own)` bytes and says how many,
/// so a field is valid only if that length covers it.
///
/// Written again here on purpose, not taken from `rttscope::sys`: the tests hold rttscope's
/// readings of the link against what this one reads, and a mistake in rttscope's layout
/// must not be shared by the reference it is checked against.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpInfoRaw {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
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
}

/// `getsockopt(TCP_INFO)` on a TCP socket: the raw struct and how many bytes the kernel filled.
pub fn tcp_info(socket: &impl AsFd) -> io::Result<(TcpInfoRaw, usize)> {
    let mut raw = TcpInfoRaw::default();
    let mut len = std::mem::size_of::<TcpInfoRaw>() as libc::socklen_t;
    // SAFETY: `raw` is a plain-data repr(C) struct we own and `len` its size; the kernel writes
    // at most `len` bytes into it and stores the count in `len`. The fd is borrowed from a
    // live socket for the duration of the call.
    let rc = unsafe {
        libc::getsockopt(socket.as_fd().as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, (&raw mut raw).cast(), &mut len)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((raw, len as usize))
}
