//! Why a proxied connection ended early, and — the one place it is decided — what a
//! client is told when rttscope itself turns it away: a MySQL ERR packet with a real code,
//! SQL state and a message that names the upstream and the reason.

use std::io;

use super::upstream::DialError;
use crate::protocol::codes;
use crate::protocol::{DecodeError, Peer};

/// A connection-level failure. Each one ends its own connection only.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// A peer broke the protocol where rttscope cannot carry on (the connection phase):
    /// logged once, connection closed.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The client went away or its socket failed (a hangup, not our fault).
    #[error("client connection: {0}")]
    Client(#[source] io::Error),
    /// The upstream server went away or its socket failed.
    #[error("upstream connection: {0}")]
    Upstream(#[source] io::Error),
    /// A step of the connection phase took too long: what did not arrive, the limit, and
    /// the config key that set it (`limits.connect_timeout` for the server's greeting,
    /// `limits.handshake_timeout` for later steps).
    #[error("{0} did not arrive within {1:?} ({2})")]
    Timeout(&'static str, std::time::Duration, &'static str),
}

impl RelayError {
    /// An I/O error on `peer`'s socket.
    pub fn io(peer: Peer, e: io::Error) -> Self {
        match peer {
            Peer::Client => RelayError::Client(e),
            Peer::Upstream => RelayError::Upstream(e),
        }
    }

    /// Hangups and resets are the ordinary end of a connection; protocol
    /// violations and timeouts deserve a warning.
    pub fn is_hangup(&self) -> bool {
        match self {
            RelayError::Client(e) | RelayError::Upstream(e) => matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::NotConnected
            ),
            _ => false,
        }
    }
}

/// Why rttscope turns a client away before (or instead of) relaying its login. Each
/// becomes an ERR packet the client shows its user.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The upstream could not be dialled.
    #[error("{0}")]
    UpstreamUnreachable(DialError),
    /// The upstream answered with something that is not a greeting, or nothing.
    #[error("upstream {upstream} sent no usable greeting: {reason}")]
    NoGreeting {
        /// The upstream address.
        upstream: String,
        /// What went wrong.
        reason: String,
    },
    /// TLS towards the upstream failed or is impossible under `upstream.tls.mode`.
    #[error("upstream {upstream}: {reason}")]
    UpstreamTls {
        /// The upstream address.
        upstream: String,
        /// What went wrong (the server offers no TLS, the certificate is not trusted...).
        reason: String,
    },
    /// The login exchange did not finish within `limits.handshake_timeout`.
    #[error("upstream {upstream} did not complete the login within limits.handshake_timeout ({})", humantime::format_duration(*.timeout))]
    LoginStalled {
        /// The upstream address.
        upstream: String,
        /// The limit.
        timeout: std::time::Duration,
    },
    /// The upstream closed or reset the connection after its greeting, before the login
    /// finished: the client has the greeting and waits for the login's answer.
    #[error("upstream {upstream} closed the connection during the login: {reason}")]
    LostDuringLogin {
        /// The upstream address.
        upstream: String,
        /// The socket error (reset, end of stream).
        reason: String,
    },
    /// The client protected its login with TLS and the long hop cannot be TLS.
    #[error(
        "the client connected with TLS but upstream {upstream} offers no TLS: rttscope will not send the login in clear; set upstream.tls.mode: disabled to allow it"
    )]
    CredentialsInClear {
        /// The upstream address.
        upstream: String,
    },
    /// A plain client sent its password encrypted, after rttscope gave it its key, in a
    /// form that key cannot open.
    #[error(
        "access denied: the password the client encrypted with rttscope's RSA key (it asked for the server's) could not be decrypted"
    )]
    PasswordNotDecrypted,
    /// The decrypted password, sent in the first packet's auth response, would not fit its
    /// one-byte length (251 bytes or more).
    #[error("access denied: the password is too long for rttscope to send in the login packet (251 bytes or more)")]
    PasswordTooLong,
    /// A client on a Unix socket (which it treats as secure) would send its password in full,
    /// in clear, across a plain long hop.
    #[error(
        "the server wants the password in full, which a client on a Unix socket sends in clear, and the long hop to upstream {upstream} is not TLS: rttscope refuses; connect over TCP, or give the long hop TLS"
    )]
    PasswordInClear {
        /// The upstream address.
        upstream: String,
    },
    /// A client without TLS sent its password in clear where the server wanted it in full
    /// (its library took the connection for a secure one), over a plain long hop.
    #[error(
        "the client sent its password in clear, where the server wanted it in full and the long hop to upstream {upstream} is not TLS: rttscope refuses and forwarded nothing; tell the client to require TLS (ssl-mode=REQUIRED), or give the long hop TLS"
    )]
    PasswordSentInClear {
        /// The upstream address.
        upstream: String,
    },
    /// rttscope's RSA key, which a plain client asked for, could not be made.
    #[error("rttscope has no RSA key to give the client for its password: {0}")]
    NoRsaKey(String),
    /// The client asked for TLS and `listen.tls.mode` is `off`.
    #[error("this rttscope does not offer TLS (listen.tls.mode: off); connect without TLS")]
    TlsOff,
    /// The client did not ask for TLS and `listen.tls.mode` is `required`.
    #[error("connections without TLS are refused (listen.tls.mode: required); connect with TLS")]
    TlsRequired,
    /// TLS with the client failed.
    #[error("TLS handshake with the client failed: {0}")]
    ClientTls(String),
    /// The client hung up right after its TLS handshake, before its login.
    #[error("the client hung up right after its TLS handshake: {0}")]
    HungUpAfterTls(String),
    /// The client's handshake response could not be read.
    #[error("{0}")]
    BadHandshake(DecodeError),
    /// The client kept the connection phase waiting: no answer to the greeting within
    /// `limits.first_byte_timeout`, a stalled TLS handshake or response, or silence past the
    /// contended grace while other clients waited for its slot.
    #[error("{what} did not come within {} ({why})", humantime::format_duration(*.waited))]
    ClientSilent {
        /// What rttscope waited for.
        what: &'static str,
        /// How long it waited.
        waited: std::time::Duration,
        /// Why that long: the config key.
        why: &'static str,
    },
    /// More clients in the connection phase than `limits.max_connecting`, for longer than
    /// `limits.connect_timeout`.
    #[error(
        "too many clients logging in at once (limits.max_connecting = {max}), none finished within limits.connect_timeout; try again"
    )]
    TooManyConnecting {
        /// The limit.
        max: u32,
    },
    /// More clients than `limits.max_connections`.
    #[error("too many connections (limits.max_connections = {max})")]
    TooManyConnections {
        /// The limit.
        max: u32,
    },
    /// The process is out of file descriptors.
    #[error("too many connections (fd limit {limit}): raise `ulimit -n` for rttscope")]
    FdLimit {
        /// The open-file limit.
        limit: u64,
    },
}

impl From<DialError> for Refusal {
    /// A dial that failed because rttscope itself is out of descriptors is rttscope's
    /// limit, not the upstream's fault: said so, and not counted against the upstream.
    fn from(e: DialError) -> Refusal {
        match &e {
            DialError::Connect { source, .. } if super::is_out_of_fds(source) => {
                Refusal::FdLimit { limit: crate::sys::nofile_limit().map_or(0, |(soft, _)| soft) }
            }
            _ => Refusal::UpstreamUnreachable(e),
        }
    }
}

impl Refusal {
    /// The MySQL error code. Only server-range codes: libmariadb (the `mariadb` CLI and
    /// everything built on Connector/C) hides the message of client-range codes (2000–2999)
    /// arriving over the wire, so the familiar 2003 would hide the reason.
    pub fn code(&self) -> u16 {
        match self {
            Refusal::UpstreamUnreachable(_)
            | Refusal::NoGreeting { .. }
            | Refusal::UpstreamTls { .. }
            | Refusal::LoginStalled { .. }
            | Refusal::LostDuringLogin { .. } => codes::UPSTREAM_UNREACHABLE,
            Refusal::CredentialsInClear { .. }
            | Refusal::PasswordInClear { .. }
            | Refusal::PasswordSentInClear { .. }
            | Refusal::TlsRequired => codes::SECURE_TRANSPORT_REQUIRED,
            Refusal::TlsOff | Refusal::ClientTls(_) | Refusal::HungUpAfterTls(_) | Refusal::ClientSilent { .. } => {
                codes::HANDSHAKE_ERROR
            }
            Refusal::BadHandshake(DecodeError::PreProtocol41) => codes::NOT_SUPPORTED_AUTH_MODE,
            Refusal::PasswordNotDecrypted | Refusal::PasswordTooLong => codes::ACCESS_DENIED,
            Refusal::NoRsaKey(_) => codes::HANDSHAKE_ERROR,
            Refusal::BadHandshake(_) => codes::HANDSHAKE_ERROR,
            Refusal::TooManyConnections { .. } | Refusal::TooManyConnecting { .. } | Refusal::FdLimit { .. } => {
                codes::TOO_MANY_CONNECTIONS
            }
        }
    }

    /// The SQL state that goes with [`code`](Self::code).
    pub fn sql_state(&self) -> &'static str {
        match self.code() {
            codes::TOO_MANY_CONNECTIONS | codes::NOT_SUPPORTED_AUTH_MODE => "08004",
            codes::HANDSHAKE_ERROR => "08S01",
            codes::ACCESS_DENIED => "28000",
            _ => "HY000",
        }
    }

    /// The text the client shows: what rttscope says, prefixed so the user knows who.
    pub fn message(&self) -> String {
        format!("rttscope: {self}")
    }

    /// Whether the upstream (not the client, not rttscope's own limits) is at fault:
    /// counted as an upstream connect error.
    pub fn is_upstream(&self) -> bool {
        matches!(
            self,
            Refusal::UpstreamUnreachable(_)
                | Refusal::NoGreeting { .. }
                | Refusal::UpstreamTls { .. }
                | Refusal::LoginStalled { .. }
                | Refusal::LostDuringLogin { .. }
        )
    }

    /// The ERR packet: sequence id `seq`; with the SQL state marker once the client has
    /// spoken the 4.1 protocol (before the greeting nothing is negotiated, and servers
    /// then send none).
    pub fn packet(&self, seq: u8, protocol_41: bool) -> Vec<u8> {
        crate::protocol::packets::err_packet(seq, self.code(), self.sql_state(), &self.message(), protocol_41)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::packets::ErrPacket;

    #[test]
    fn each_refusal_has_a_code_a_state_and_a_reason() {
        let cases = [
            (Refusal::TooManyConnections { max: 2 }, 1040, "08004"),
            (Refusal::TlsRequired, 3159, "HY000"),
            (Refusal::CredentialsInClear { upstream: "db:3306".into() }, 3159, "HY000"),
            (Refusal::UpstreamTls { upstream: "db:3306".into(), reason: "no TLS".into() }, 1429, "HY000"),
            (Refusal::TlsOff, 1043, "08S01"),
            (Refusal::PasswordNotDecrypted, 1045, "28000"),
            (Refusal::PasswordTooLong, 1045, "28000"),
            (Refusal::PasswordInClear { upstream: "db:3306".into() }, 3159, "HY000"),
            (Refusal::BadHandshake(DecodeError::PreProtocol41), 1251, "08004"),
        ];
        for (refusal, code, state) in cases {
            let packet = refusal.packet(2, true);
            let err = ErrPacket::parse(&packet[4..]).expect("an ERR packet");
            assert_eq!((err.code, &err.sql_state), (code, state.as_bytes().try_into().unwrap()), "{refusal}");
            assert_eq!(packet[3], 2);
            assert!(String::from_utf8_lossy(&packet).contains(&refusal.to_string()));
        }
        assert!(Refusal::CredentialsInClear { upstream: "db:3306".into() }.message().contains("db:3306"));
    }
}
