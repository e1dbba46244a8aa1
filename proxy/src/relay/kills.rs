//! A KILL between two proxied connections, in the order the server gives it.
//!
//! A server that kills a connection shuts its socket down before it answers the KILL, so a
//! client that killed one of its own connections finds it closed the moment the answer
//! arrives: libmariadb looks (a zero-timeout poll) before each command, sees the hangup and
//! reconnects (`MYSQL_OPT_RECONNECT`) instead of sending into a dead connection. Through
//! rttscope the two connections are two tasks, possibly on two threads: the killer's answer
//! may reach its client before the victim's task has noticed the server's close and closed
//! its client socket. The client then sends its next command into a connection about to
//! close and gets "Lost connection" (2013) where directly it reconnects.
//!
//! So each connection is listed by the id the server gave it (its greeting's connection
//! id) from the moment that greeting goes to its client — which may name it in a KILL from
//! then on, and has its login's OK before the victim's task could list it after the login —
//! until its client socket is closed; a connection whose client sends
//! `KILL [HARD|SOFT] [CONNECTION] <id>` (or `COM_PROCESS_KILL`) naming another listed
//! connection holds the server's answer back until that one is closed — for at most
//! [`HOLD_LIMIT`], and not at all when the answer is an ERR (nothing was killed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::Duration;

use crate::protocol::binary::query_attributes;
use crate::protocol::constants::capability::CLIENT_QUERY_ATTRIBUTES;
use crate::protocol::constants::command::{COM_PROCESS_KILL, COM_QUERY};
use crate::sync::locked;

/// The longest a KILL's answer waits for its victim to close: the victim's task has the
/// server's close in hand by then unless it is stuck writing to a client that does not
/// read; its client is not the killer's business.
pub(super) const HOLD_LIMIT: Duration = Duration::from_millis(200);

/// A KILL's answer held for its victim: the victim, and the limit once the answer is here.
pub(super) type Held = (Arc<Victim>, Option<std::pin::Pin<Box<tokio::time::Sleep>>>);

/// Connections by the server's id for them.
#[derive(Default)]
pub(crate) struct Kills {
    listed: Mutex<HashMap<u32, Arc<Victim>>>,
}

/// One listed connection: whether its client socket is closed yet, and who waits for it.
#[derive(Default)]
pub(crate) struct Victim {
    closed: AtomicBool,
    waiting: Mutex<Vec<Waker>>,
}

impl Victim {
    /// Whether the client socket is closed; if not, `waker` is woken when it is.
    pub fn closed_or_wake(&self, waker: &Waker) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return true;
        }
        let mut waiting = locked(&self.waiting);
        // Checked again under the lock the closing side takes: no wake-up is lost.
        if self.closed.load(Ordering::Acquire) {
            return true;
        }
        if !waiting.iter().any(|w| w.will_wake(waker)) {
            waiting.push(waker.clone());
        }
        false
    }

    fn close(&self) {
        let waiting = {
            let mut waiting = locked(&self.waiting);
            self.closed.store(true, Ordering::Release);
            std::mem::take(&mut *waiting)
        };
        waiting.into_iter().for_each(Waker::wake);
    }
}

impl Kills {
    /// Lists the connection the server calls `server_id` until the guard is dropped: drop
    /// it after the client socket is closed.
    pub fn list(self: &Arc<Self>, server_id: u32) -> Listed {
        let victim = Arc::new(Victim::default());
        locked(&self.listed).insert(server_id, victim.clone());
        Listed { kills: self.clone(), server_id, victim }
    }

    /// The listed connection `server_id`, if any.
    pub fn victim(&self, server_id: u64) -> Option<Arc<Victim>> {
        let id = u32::try_from(server_id).ok()?;
        locked(&self.listed).get(&id).cloned()
    }
}

/// A connection's place in [`Kills`]; dropping it says its client socket is closed.
pub(crate) struct Listed {
    kills: Arc<Kills>,
    server_id: u32,
    victim: Arc<Victim>,
}

impl Drop for Listed {
    fn drop(&mut self) {
        {
            let mut listed = locked(&self.kills.listed);
            // A server that reuses an id after a restart: only our own entry goes.
            if listed.get(&self.server_id).is_some_and(|v| Arc::ptr_eq(v, &self.victim)) {
                listed.remove(&self.server_id);
            }
        }
        self.victim.close();
    }
}

/// Whether the command at the front of `bytes` may be a KILL ([`target`] tells): asked of
/// every command, so it looks at two bytes — the command, and a statement's first letter
/// past any blanks (every statement of a client that sends query attributes goes on to
/// [`target`], its first bytes being the attributes).
#[inline]
pub(super) fn may_target(bytes: &[u8], capabilities: u64) -> bool {
    match bytes.get(4) {
        Some(&COM_PROCESS_KILL) => true,
        Some(&COM_QUERY) if capabilities & CLIENT_QUERY_ATTRIBUTES != 0 => true,
        Some(&COM_QUERY) => bytes
            .get(5..)
            .and_then(|sql| sql.iter().find(|b| !b.is_ascii_whitespace()))
            .is_some_and(|&b| b | 0x20 == b'k'),
        _ => false,
    }
}

/// The connection the command at the front of `bytes` kills, when it is a whole
/// `KILL [HARD|SOFT] [CONNECTION] <id>` query or `COM_PROCESS_KILL` starting a command.
pub(super) fn target(bytes: &[u8], capabilities: u64) -> Option<u64> {
    let (_, command, body) = super::local::whole_command(bytes)?;
    match command {
        COM_PROCESS_KILL => {
            let id = body.get(..4)?;
            Some(u64::from(u32::from_le_bytes([id[0], id[1], id[2], id[3]])))
        }
        COM_QUERY => {
            let sql = if capabilities & CLIENT_QUERY_ATTRIBUTES != 0 { query_attributes(body)?.sql } else { body };
            kill_statement(sql)
        }
        _ => None,
    }
}

/// `KILL [HARD|SOFT] [CONNECTION] <id>` (any case, a trailing `;`): the id. `KILL QUERY`,
/// `KILL USER` and anything else: none.
fn kill_statement(sql: &[u8]) -> Option<u64> {
    // Asked of every statement sent with nothing in flight: anything long, or not starting
    // with KILL, is passed over without a look at the rest.
    let sql = sql.trim_ascii_start();
    if sql.len() > 64 || !sql.get(..4)?.eq_ignore_ascii_case(b"KILL") {
        return None;
    }
    let text = std::str::from_utf8(sql).ok()?;
    let text = text.trim().trim_end_matches(';').trim_end();
    let mut words = text.split_ascii_whitespace().peekable();
    if !words.next()?.eq_ignore_ascii_case("KILL") {
        return None;
    }
    if words.peek().is_some_and(|w| w.eq_ignore_ascii_case("HARD") || w.eq_ignore_ascii_case("SOFT")) {
        words.next();
    }
    if words.peek().is_some_and(|w| w.eq_ignore_ascii_case("CONNECTION")) {
        words.next();
    }
    let id = words.next()?;
    if words.next().is_some() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

/// Whether the response at the front of `bytes` (as far as it has come) is an ERR.
pub(super) fn is_err_response(bytes: &[u8]) -> Option<bool> {
    bytes.get(4).map(|&b| b == 0xFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::framing;

    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        [&framing::header(payload.len(), seq)[..], payload].concat()
    }

    #[test]
    fn kill_statements_name_their_victim() {
        for (sql, id) in [
            ("KILL 52", Some(52)),
            ("kill connection 7;", Some(7)),
            ("  KILL HARD CONNECTION 9 ", Some(9)),
            ("KILL SOFT 3", Some(3)),
            ("KILL QUERY 52", None),
            ("KILL USER root", None),
            ("KILL CONNECTION_ID()", None),
            ("KILL 5 6", None),
            ("SELECT 52", None),
        ] {
            let mut payload = vec![COM_QUERY];
            payload.extend_from_slice(sql.as_bytes());
            assert_eq!(target(&packet(0, &payload), 0), id, "{sql}");
            // Every KILL passes the quick look.
            assert!(id.is_none() || may_target(&packet(0, &payload), 0), "{sql}");
        }
        assert_eq!(target(&packet(0, &[COM_PROCESS_KILL, 52, 0, 0, 0]), 0), Some(52));
        // Not a command start, truncated, empty.
        assert_eq!(target(&packet(1, b"\x03KILL 52"), 0), None);
        assert_eq!(target(&packet(0, b"\x03KILL 52")[..6], 0), None);
        assert_eq!(target(&[], 0), None);
    }

    #[test]
    fn the_killer_waits_until_the_victim_is_closed() {
        let kills = Arc::new(Kills::default());
        let listed = kills.list(52);
        let victim = kills.victim(52).expect("listed");
        assert!(kills.victim(53).is_none());
        assert!(!victim.closed_or_wake(Waker::noop()));
        drop(listed);
        assert!(victim.closed_or_wake(Waker::noop()));
        assert!(kills.victim(52).is_none());
    }
}
