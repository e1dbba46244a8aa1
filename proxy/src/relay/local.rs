//! Statements rttscope answers itself (the SQL view): recognised in what the client
//! sends, kept off the upstream, answered on the client leg. The relay only finds and
//! delivers them; what they mean and what the answer says is the answerer's business
//! ([`LocalAnswers`], implemented by `crate::sqlview`).
//!
//! A statement is answered locally only where that cannot reorder anything: the
//! connection is synchronised and idle (nothing in flight either way), and the statement
//! is a whole `COM_QUERY` packet at the front of what the client just sent. Anywhere else
//! it goes to the server like any statement, which answers with a syntax error — the
//! client is never left waiting.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;

use super::error::RelayError;
use super::leg::Leg;
use crate::protocol::Peer;
use crate::protocol::binary::query_attributes;
use crate::protocol::constants::capability::CLIENT_QUERY_ATTRIBUTES;
use crate::protocol::constants::command::COM_QUERY;
use crate::protocol::session::Identity;

/// What the relay tells an answerer about the connection asking.
pub struct LocalContext<'a> {
    /// rttscope's id of the connection.
    pub conn_id: u64,
    /// Capabilities negotiated with the client (the answer's shape depends on them).
    pub capabilities: u64,
    /// The server status flags the client last saw, to repeat in the answer.
    pub server_status: u16,
    /// Who is asking.
    pub identity: &'a Identity,
}

/// Answers statements addressed to rttscope rather than the server.
pub trait LocalAnswers: Send + Sync {
    /// Whether `sql` (a whole `COM_QUERY` text) is addressed to rttscope. Cheap: asked of
    /// each statement that could be one.
    fn claims(&self, sql: &[u8]) -> bool;

    /// The complete response to `sql` (packets from sequence id 1): a result set, an OK
    /// or an ERR. Only asked after [`claims`](Self::claims) said yes.
    fn answer(&self, sql: &[u8], context: &LocalContext<'_>) -> Vec<u8>;
}

/// The `COM_QUERY` packet at the front of `bytes`, when it is complete, starts a
/// command (sequence id 0) and carries SQL `answers` claims: its length and the SQL.
pub(super) fn claimed<'a>(bytes: &'a [u8], capabilities: u64, answers: &dyn LocalAnswers) -> Option<(usize, &'a [u8])> {
    let (len, command, body) = whole_command(bytes)?;
    if command != COM_QUERY {
        return None;
    }
    let sql = if capabilities & CLIENT_QUERY_ATTRIBUTES != 0 { query_attributes(body)?.sql } else { body };
    answers.claims(sql).then_some((len, sql))
}

/// The command at the front of `bytes` when it is whole in one packet and starts a command
/// (sequence id 0): its length on the wire, its command byte and the rest of its payload.
/// A statement rttscope looks at (its own, a KILL) is short: never one split across packets.
pub(super) fn whole_command(bytes: &[u8]) -> Option<(usize, u8, &[u8])> {
    let header = bytes.get(..4)?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if header[3] != 0 || len == 0 || len >= 0xFF_FFFF {
        return None;
    }
    let (&command, body) = bytes.get(4..4 + len)?.split_first()?;
    Some((4 + len, command, body))
}

/// An answer on its way to the client: written before anything the server sends
/// next, so the client reads responses in the order it asked.
pub(super) struct LocalReply {
    bytes: Vec<u8>,
    sent: usize,
    unflushed: bool,
}

impl LocalReply {
    pub fn new(bytes: Vec<u8>) -> LocalReply {
        LocalReply { bytes, sent: 0, unflushed: false }
    }

    /// Writes and flushes what it can; `Ready(true)` once all is delivered.
    pub fn poll_send(&mut self, cx: &mut Context<'_>, to: &mut Leg, progress: &mut bool) -> Result<bool, RelayError> {
        while self.sent < self.bytes.len() {
            match Pin::new(&mut *to).poll_write(cx, &self.bytes[self.sent..]) {
                Poll::Ready(Ok(0)) => return Err(RelayError::io(Peer::Client, std::io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.sent += n;
                    self.unflushed = true;
                    *progress = true;
                }
                Poll::Ready(Err(e)) => return Err(RelayError::io(Peer::Client, e)),
                Poll::Pending => return Ok(false),
            }
        }
        if self.unflushed {
            match Pin::new(to).poll_flush(cx) {
                Poll::Ready(flushed) => flushed.map_err(|e| RelayError::io(Peer::Client, e))?,
                Poll::Pending => return Ok(false),
            }
            self.unflushed = false;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::framing;

    struct Ours;

    impl LocalAnswers for Ours {
        fn claims(&self, sql: &[u8]) -> bool {
            sql.starts_with(b"SHOW RTTSCOPE")
        }
        fn answer(&self, _sql: &[u8], _context: &LocalContext<'_>) -> Vec<u8> {
            Vec::new()
        }
    }

    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        [&framing::header(payload.len(), seq)[..], payload].concat()
    }

    #[test]
    fn only_a_whole_query_starting_a_command_is_claimed() {
        let ours = packet(0, b"\x03SHOW RTTSCOPE INJECT");
        let pipelined = [ours.clone(), packet(0, b"\x03SELECT 1")].concat();
        assert_eq!(claimed(&ours, 0, &Ours), Some((ours.len(), &b"SHOW RTTSCOPE INJECT"[..])));
        assert_eq!(claimed(&pipelined, 0, &Ours).map(|(len, _)| len), Some(ours.len()));
        // Incomplete, not a command start, not COM_QUERY, not ours: forwarded.
        assert_eq!(claimed(&ours[..ours.len() - 1], 0, &Ours), None);
        assert_eq!(claimed(&packet(1, b"\x03SHOW RTTSCOPE INJECT"), 0, &Ours), None);
        assert_eq!(claimed(&packet(0, b"\x16SHOW RTTSCOPE INJECT"), 0, &Ours), None);
        assert_eq!(claimed(&packet(0, b"\x03SELECT 1"), 0, &Ours), None);
        assert_eq!(claimed(&[], 0, &Ours), None);
    }

    #[test]
    fn query_attributes_come_before_the_sql() {
        // No attributes: a count of 0 and a parameter-set count of 1.
        let with_attributes = packet(0, b"\x03\x00\x01SHOW RTTSCOPE LINK");
        assert_eq!(
            claimed(&with_attributes, CLIENT_QUERY_ATTRIBUTES, &Ours),
            Some((with_attributes.len(), &b"SHOW RTTSCOPE LINK"[..]))
        );
        assert_eq!(claimed(&with_attributes, 0, &Ours), None);
    }
}
