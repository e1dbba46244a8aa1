//! The other end of a TCP connection when it lives on this host — the application beside a
//! sidecar, on loopback — as the kernel's socket diagnostics (`sock_diag`, what `ss` reads)
//! show it: how many bytes wait in its receive queue, received and acknowledged but not yet
//! read by the application.
//!
//! Why: rttscope sees only its own socket. Bytes the client's kernel acknowledged have left
//! it, whether the application took them or not; an application reading a result slowly
//! behind a receive buffer that autotuning grew to megabytes looks, from rttscope's side, like
//! one that kept up. On the same host the kernel can say what it holds for the application.
//! Where the client is elsewhere the lookup finds nothing, and nothing is claimed.
//!
//! One exact lookup (`SOCK_DIAG_BY_FAMILY` without `NLM_F_DUMP`) by the connection's four
//! addresses: a `netlink` socket opened for it, a request of 72 bytes, an answer of 88. No
//! privilege is needed to read another socket's queue lengths. Asked only during large
//! transfers (a reading every `link.sample_interval`, and one at a response's end).

use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

/// `SOCK_DIAG_BY_FAMILY` (`linux/sock_diag.h`): the request and its answer's type.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `NLMSG_ERROR` (`linux/netlink.h`): the lookup failed; an `errno` follows the header.
const NLMSG_ERROR: u16 = 2;
/// `NLM_F_REQUEST`.
const NLM_F_REQUEST: u16 = 1;
/// `struct nlmsghdr`'s length.
const HEADER: usize = 16;
/// `struct inet_diag_req_v2`'s length: family, protocol, ext, pad, states, then the id.
const REQUEST: usize = HEADER + 8 + ID;
/// `struct inet_diag_sockid`'s length: ports, addresses, interface, cookie.
const ID: usize = 48;
/// Where `idiag_rqueue` sits in the answer: after the header, family, state, timer,
/// retransmits, the id and `idiag_expires`.
const RQUEUE_AT: usize = HEADER + 4 + ID + 4;

/// How to ask the kernel about the other end of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalPeer {
    request: [u8; REQUEST],
}

impl LocalPeer {
    /// The lookup for the socket at the other end of `socket` (a connected TCP socket): the
    /// one whose own address is `socket`'s peer. `None` for anything but TCP over IP.
    pub fn of(socket: SockRef<'_>) -> Option<LocalPeer> {
        let (ours, theirs) = (socket.local_addr().ok()?.as_socket()?, socket.peer_addr().ok()?.as_socket()?);
        Some(LocalPeer { request: request(theirs, ours)? })
    }

    /// Bytes waiting in the other end's receive queue, unread by its application; `None`
    /// when the kernel has no such socket (the other end is on another host, or gone).
    pub fn unread(&self) -> io::Result<Option<u32>> {
        let diag =
            Socket::new(Domain::from(libc::AF_NETLINK), Type::DGRAM, Some(Protocol::from(libc::NETLINK_SOCK_DIAG)))?;
        // An unconnected netlink socket sends to the kernel. The kernel answers while it takes
        // the request: the answer is there when `send` returns, and a read never waits.
        diag.send(&self.request)?;
        diag.set_nonblocking(true)?;
        let mut answer = [0u8; 512];
        let n = (&diag).read(&mut answer)?;
        parse_answer(answer.get(..n).unwrap_or_default())
    }
}

/// The request for the TCP socket whose own address is `own` and whose peer is `peer`.
fn request(own: SocketAddr, peer: SocketAddr) -> Option<[u8; REQUEST]> {
    let (own_ip, peer_ip) = (unmapped(own.ip()), unmapped(peer.ip()));
    let family = match (own_ip, peer_ip) {
        (IpAddr::V4(_), IpAddr::V4(_)) => libc::AF_INET,
        (IpAddr::V6(_), IpAddr::V6(_)) => libc::AF_INET6,
        _ => return None,
    };
    let mut r = [0u8; REQUEST];
    r[0..4].copy_from_slice(&(REQUEST as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    // seq and pid stay 0: one request per socket, and the kernel fills in the pid.
    r[HEADER] = u8::try_from(family).ok()?;
    r[HEADER + 1] = u8::try_from(libc::IPPROTO_TCP).ok()?;
    // Every state: the other end may have begun to close.
    r[HEADER + 4..HEADER + 8].copy_from_slice(&u32::MAX.to_ne_bytes());
    let id = HEADER + 8;
    r[id..id + 2].copy_from_slice(&own.port().to_be_bytes());
    r[id + 2..id + 4].copy_from_slice(&peer.port().to_be_bytes());
    write_ip(&mut r[id + 4..id + 20], own_ip);
    write_ip(&mut r[id + 20..id + 36], peer_ip);
    // Any interface (id + 36..40 stays 0), and no cookie: INET_DIAG_NOCOOKIE, all ones.
    r[id + 40..id + 48].fill(0xff);
    Some(r)
}

/// An IPv4 client reaching a dual-stack listener shows as `::ffff:a.b.c.d` there; its own
/// socket is IPv4.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// An address as `inet_diag_sockid` holds it: network order, IPv4 in the first four bytes.
fn write_ip(to: &mut [u8], ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => to[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => to.copy_from_slice(&v6.octets()),
    }
}

/// The receive queue from the kernel's answer; `None` if it has no such socket.
fn parse_answer(answer: &[u8]) -> io::Result<Option<u32>> {
    let field = |at: usize| answer.get(at..at + 4).and_then(|b| b.try_into().ok());
    let kind = answer.get(4..6).and_then(|b| b.try_into().ok()).map(u16::from_ne_bytes);
    match kind {
        Some(SOCK_DIAG_BY_FAMILY) => field(RQUEUE_AT)
            .map(|b| Some(u32::from_ne_bytes(b)))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "sock_diag: a short answer")),
        Some(NLMSG_ERROR) => match field(HEADER).map(i32::from_ne_bytes) {
            Some(e) if -e == libc::ENOENT => Ok(None),
            Some(e) => Err(io::Error::from_raw_os_error(-e)),
            None => Err(io::Error::new(io::ErrorKind::InvalidData, "sock_diag: a short error")),
        },
        _ => Err(io::Error::new(io::ErrorKind::InvalidData, "sock_diag: an answer of an unknown kind")),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    use super::*;

    /// Waits until the kernel has handed every written byte to the other end.
    fn acknowledged(socket: &TcpStream) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while crate::sys::unsent(socket).unwrap() > 0 {
            assert!(Instant::now() < deadline, "the bytes were never acknowledged");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn unread(socket: &TcpStream) -> Option<u32> {
        LocalPeer::of(SockRef::from(socket)).expect("a TCP socket").unread().expect("sock_diag answers")
    }

    #[test]
    fn the_other_ends_unread_bytes_are_read_from_the_kernel() {
        for listen in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = TcpListener::bind(listen) else { continue };
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (mut server, _) = listener.accept().unwrap();
            assert_eq!(unread(&server), Some(0), "{listen}: nothing sent yet");
            server.write_all(&[7u8; 10_000]).unwrap();
            acknowledged(&server);
            assert_eq!(unread(&server), Some(10_000), "{listen}: all of it waits for the client");
            (&client).read_exact(&mut [0u8; 4_000]).unwrap();
            assert_eq!(unread(&server), Some(6_000), "{listen}: less what it read");
            // And the other way: the server read nothing the client sent.
            (&client).write_all(&[1u8; 300]).unwrap();
            acknowledged(&client);
            assert_eq!(unread(&client), Some(300), "{listen}: the server's side");
        }
    }

    #[test]
    fn a_dual_stack_listener_finds_an_ipv4_client() {
        let Ok(listener) = TcpListener::bind("[::]:0") else { return };
        let client = TcpStream::connect(("127.0.0.1", listener.local_addr().unwrap().port())).unwrap();
        let (mut server, peer) = listener.accept().unwrap();
        assert!(matches!(peer.ip(), IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some()), "{peer}");
        server.write_all(&[7u8; 1_000]).unwrap();
        acknowledged(&server);
        assert_eq!(unread(&server), Some(1_000));
        drop(client);
    }

    #[test]
    fn no_such_socket_is_none() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        // The server's view with the client's port changed: no socket has that address.
        let peer = client.local_addr().unwrap();
        let gone = SocketAddr::new(peer.ip(), peer.port().wrapping_add(1).max(1));
        let lookup = LocalPeer { request: request(gone, server.local_addr().unwrap()).unwrap() };
        assert_eq!(lookup.unread().unwrap(), None);
    }

    #[test]
    fn a_unix_socket_has_no_lookup() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(LocalPeer::of(SockRef::from(&a)), None);
    }

    #[test]
    fn answers_too_short_or_unknown_are_errors_not_panics() {
        assert!(parse_answer(&[]).is_err());
        let mut short = [0u8; 20];
        short[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        assert!(parse_answer(&short).is_err());
        let mut error = [0u8; 20];
        error[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        error[16..20].copy_from_slice(&(-libc::EACCES).to_ne_bytes());
        assert_eq!(parse_answer(&error).unwrap_err().raw_os_error(), Some(libc::EACCES));
    }
}
