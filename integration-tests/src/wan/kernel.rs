//! What the kernels at either end of the link say about its TCP: one socket's `TCP_INFO`, and a
//! namespace's SNMP counters (`/proc/net/snmp` and `/proc/net/netstat`, which `nstat` reads).

use std::collections::BTreeMap;
use std::io;
use std::mem::offset_of;
use std::os::fd::AsFd;

use super::sys::{self, TcpInfoRaw};

/// A socket's `TCP_INFO`, the fields the emulator's tests use. Fields the running kernel does
/// not report are `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpInfo {
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`), SYN-ACK
    /// retransmissions of a passive open included.
    pub total_retrans: u32,
    /// Segments sent, and those of them carrying data (`tcpi_segs_out`, `tcpi_data_segs_out`).
    pub segs_out: u32,
    pub data_segs_out: u32,
    /// Segments received, and those carrying data.
    pub segs_in: u32,
    pub data_segs_in: u32,
    /// Smoothed and minimum RTT, in µs.
    pub rtt_us: u32,
    pub min_rtt_us: u32,
    /// The reordering degree TCP assumes now, in segments (3 until it sees reordering).
    pub reordering: u32,
    /// Bytes retransmitted (Linux 4.19).
    pub bytes_retrans: Option<u64>,
    /// Segments the peer reported, by D-SACK, to have received twice (Linux 4.19).
    pub dsack_dups: Option<u32>,
    /// Times the sender detected reordering (Linux 4.19).
    pub reord_seen: Option<u32>,
    /// Data segments this side queued out of order (Linux 5.4).
    pub rcv_ooopack: Option<u32>,
}

/// `TCP_INFO` of `socket` (any TCP socket: std, tokio or socket2).
pub fn tcp_info(socket: &impl AsFd) -> io::Result<TcpInfo> {
    let (raw, len) = sys::tcp_info(socket)?;
    let has = |offset: usize, size: usize| len >= offset + size;
    let u64_at = |offset: usize, v: u64| has(offset, 8).then_some(v);
    let u32_at = |offset: usize, v: u32| has(offset, 4).then_some(v);
    Ok(TcpInfo {
        total_retrans: raw.total_retrans,
        segs_out: raw.segs_out,
        data_segs_out: raw.data_segs_out,
        segs_in: raw.segs_in,
        data_segs_in: raw.data_segs_in,
        rtt_us: raw.rtt,
        min_rtt_us: raw.min_rtt,
        reordering: raw.reordering,
        bytes_retrans: u64_at(offset_of!(TcpInfoRaw, bytes_retrans), raw.bytes_retrans),
        dsack_dups: u32_at(offset_of!(TcpInfoRaw, dsack_dups), raw.dsack_dups),
        reord_seen: u32_at(offset_of!(TcpInfoRaw, reord_seen), raw.reord_seen),
        rcv_ooopack: u32_at(offset_of!(TcpInfoRaw, rcv_ooopack), raw.rcv_ooopack),
    })
}

/// A namespace's protocol counters, keyed `Group.Name` as the files name them:
/// `Tcp.InCsumErrors`, `TcpExt.TCPOFOQueue`, `TcpExt.TCPDSACKOldSent` (`nstat` joins the two
/// without the dot). A new namespace starts them all at zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetCounters(BTreeMap<String, u64>);

impl NetCounters {
    /// The counter `key` (`"TcpExt.TCPOFOQueue"`), `None` if this kernel has no such counter.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.0.get(key).copied()
    }

    /// Parses the text of `/proc/net/snmp` or `/proc/net/netstat`: pairs of lines, a header
    /// `Group: Name1 Name2 …` followed by `Group: value1 value2 …`.
    pub(super) fn add_proc_text(&mut self, text: &str) {
        let mut lines = text.lines();
        while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
            let (Some((group, names)), Some((_, values))) = (names.split_once(':'), values.split_once(':')) else {
                continue;
            };
            for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
                // A few counters (Tcp.MaxConn) are signed; they never matter here.
                if let Ok(value) = value.parse() {
                    self.0.insert(format!("{group}.{name}"), value);
                }
            }
        }
    }

    /// Reads the counters of the calling thread's network namespace.
    pub(super) fn read_own() -> io::Result<NetCounters> {
        let mut counters = NetCounters::default();
        // thread-self: /proc/self/net is the namespace of the process's main thread, not ours.
        for file in ["/proc/thread-self/net/snmp", "/proc/thread-self/net/netstat"] {
            counters.add_proc_text(&std::fs::read_to_string(file)?);
        }
        Ok(counters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_header_value_line_pairs() {
        let mut c = NetCounters::default();
        c.add_proc_text("Tcp: RtoAlgorithm MaxConn InErrs InCsumErrors\nTcp: 1 -1 7 5\n");
        c.add_proc_text("TcpExt: SyncookiesSent TCPOFOQueue\nTcpExt: 0 12\nIpExt: InNoRoutes\nIpExt: 3\n");
        assert_eq!(c.get("Tcp.InErrs"), Some(7));
        assert_eq!(c.get("Tcp.InCsumErrors"), Some(5));
        assert_eq!(c.get("Tcp.MaxConn"), None);
        assert_eq!(c.get("TcpExt.TCPOFOQueue"), Some(12));
        assert_eq!(c.get("IpExt.InNoRoutes"), Some(3));
        assert_eq!(c.get("TcpExt.Nope"), None);
    }

    #[test]
    fn tcp_info_of_a_loopback_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let info = tcp_info(&client).unwrap();
        assert_eq!(info.total_retrans, 0);
        assert!(info.segs_out >= 1, "{info:?}");
        assert!(tcp_info(&listener).is_ok());
    }
}
