//! The `sql_mode` a connection's session may be in, as far as it changes how SQL lexes:
//! followed from the commands sent and the answers to them, pipelined or not.

use crate::fingerprint::{Server, SqlMode, SqlModes, sql_mode_after};
use crate::protocol::constants::command::{COM_CHANGE_USER, COM_RESET_CONNECTION, COM_STMT_EXECUTE, COM_STMT_PREPARE};
use crate::protocol::constants::status::SERVER_STATUS_NO_BACKSLASH_ESCAPES;
use crate::protocol::{CommandPacket, Summary};

/// One connection's view of its session's modes.
#[derive(Debug)]
pub(super) struct SessionModes {
    /// The modes the session may be in as of the last answer.
    settled: SqlModes,
    /// The modes the next command sent may be read under: `settled`, widened by every command
    /// still in flight that may change it (it may succeed or fail).
    ahead: SqlModes,
    /// A prepared statement may change the mode: every execute may then.
    prepared_change: bool,
    /// The server, from its greeting: which versioned comments it runs.
    server: Server,
}

impl Default for SessionModes {
    /// Until the server says, anything: a new session takes the global mode, which rttscope
    /// cannot see (`SET GLOBAL sql_mode` on another connection, or the server's config).
    fn default() -> Self {
        let any = SqlModes::unknown(SqlMode::default());
        SessionModes { settled: any, ahead: any, prepared_change: false, server: Server::Unknown }
    }
}

impl SessionModes {
    /// The server greeted with `version`.
    pub(super) fn greeted(&mut self, version: &str) {
        self.server = Server::from_version(version);
    }

    /// What the next command is read under.
    pub(super) fn ahead(&self) -> SqlModes {
        self.ahead.on(self.server)
    }

    /// What a command does to the modes besides a query's `SET` (which `Texts::query` reads):
    /// a session reset returns them to the global mode, and an execute may run a prepared
    /// `SET sql_mode`.
    pub(super) fn change(&mut self, c: &CommandPacket<'_>) -> Option<SqlModes> {
        match c.command {
            COM_RESET_CONNECTION | COM_CHANGE_USER => Some(SqlModes::unknown(SqlMode::default())),
            COM_STMT_PREPARE => {
                self.prepared_change |= sql_mode_after(c.payload, self.ahead()).is_some();
                None
            }
            COM_STMT_EXECUTE if self.prepared_change => Some(SqlModes::unknown(self.ahead.likely())),
            _ => None,
        }
    }

    /// A command went up, read under `mode`, after which the session may be in `after` if it
    /// may change the modes: the next is read under both, as it may fail.
    pub(super) fn sent(&mut self, mode: SqlModes, after: Option<SqlModes>) -> Option<SqlModes> {
        if let Some(a) = after {
            self.ahead = mode.or(a);
        }
        after
    }

    /// A command was answered: the server says whether backslashes escape in every OK/EOF
    /// status; `ANSI_QUOTES` is known only from a literal `SET sql_mode` it accepted. A command
    /// that failed part way may have changed anything. `idle`: nothing else is in flight.
    pub(super) fn answered(&mut self, s: &Summary, after: Option<SqlModes>, idle: bool) {
        if let Some(after) = after {
            if s.error.is_none() {
                self.settled = after;
            } else {
                self.settled = SqlModes::unknown(self.settled.likely());
                self.ahead = self.ahead.or(self.settled);
            }
        }
        if let Some(status) = s.status {
            self.settled = self.settled.with_backslash_status(status & SERVER_STATUS_NO_BACKSLASH_ESCAPES != 0);
        }
        if idle {
            self.ahead = self.settled;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::sql_mode_after;
    use crate::protocol::constants::command::COM_QUERY;
    use crate::protocol::packets::ErrPacket;

    const NBE: SqlMode = SqlMode { no_backslash_escapes: true, ansi_quotes: false };

    fn ok(no_backslash_escapes: bool) -> Summary {
        let status = if no_backslash_escapes { SERVER_STATUS_NO_BACKSLASH_ESCAPES } else { 0 };
        Summary { command: COM_QUERY, status: Some(status), ..Summary::default() }
    }

    /// Sends `sql` as a query; returns what it was read under and what it may leave.
    fn send(modes: &mut SessionModes, sql: &str) -> (SqlModes, Option<SqlModes>) {
        let read_under = modes.ahead();
        let c = CommandPacket {
            command: COM_QUERY,
            payload: sql.as_bytes(),
            len: sql.len() as u64,
            query_attributes: false,
        };
        let after = modes.change(&c).or(sql_mode_after(sql.as_bytes(), read_under));
        (read_under, modes.sent(read_under, after))
    }

    #[test]
    fn a_new_session_knows_its_backslashes_once_answered_but_not_its_quotes() {
        let mut modes = SessionModes::default();
        assert!(!modes.ahead().is_known());
        modes.answered(&ok(false), None, true);
        assert!(!modes.ahead().is_known() && !modes.ahead().may_be(NBE));
        let (_, after) = send(&mut modes, "SET sql_mode = ''");
        modes.answered(&ok(false), after, true);
        assert_eq!(modes.ahead(), SqlModes::known(SqlMode::default()));
    }

    #[test]
    fn a_command_pipelined_behind_a_set_is_read_both_ways() {
        let mut modes = SessionModes::default();
        let (_, after) = send(&mut modes, "SET sql_mode = ''");
        modes.answered(&ok(false), after, true);
        for (from, to) in [("", "NO_BACKSLASH_ESCAPES"), ("NO_BACKSLASH_ESCAPES", "")] {
            let (_, set) = send(&mut modes, &format!("SET sql_mode = '{to}'"));
            let (next, none) = send(&mut modes, "SELECT 1");
            assert!(next.may_be(NBE) && next.may_be(SqlMode::default()), "{from} -> {to}: {next:?}");
            assert_eq!(none, None);
            modes.answered(&ok(to.is_empty()), set, false);
            assert!(!modes.ahead().is_known(), "still in flight behind it");
            modes.answered(&ok(!to.is_empty()), None, true);
            assert!(modes.ahead().is_known(), "{:?}", modes.ahead());
        }
    }

    #[test]
    fn a_failed_change_or_a_reset_leaves_the_mode_unknown() {
        let mut modes = SessionModes::default();
        let (_, after) = send(&mut modes, "SET sql_mode = ''");
        modes.answered(&ok(false), after, true);
        let (_, after) = send(&mut modes, "SET sql_mode = 'ANSI'; SET sql_mode = 'NO_SUCH_MODE'");
        let failed = Summary { error: Some(ErrPacket { code: 1231, sql_state: *b"42000" }), status: None, ..ok(false) };
        modes.answered(&failed, after, true);
        assert!(!modes.ahead().is_known());
        let reset = CommandPacket { command: COM_RESET_CONNECTION, payload: b"", len: 0, query_attributes: false };
        let after = modes.change(&reset);
        assert!(after.is_some_and(|a| !a.is_known()));
    }

    #[test]
    fn the_greeting_decides_the_versioned_comments_for_good() {
        let mut modes = SessionModes::default();
        modes.greeted("5.5.5-10.11.19-MariaDB-0+deb12u1");
        // A versioned comment MariaDB skips sets nothing; one it runs does.
        assert_eq!(send(&mut modes, "/*!99999 SET sql_mode = 'ANSI' */").1, None);
        let (_, after) = send(&mut modes, "/*!40101 SET sql_mode = 'ANSI' */");
        modes.answered(&ok(false), after, true);
        let ansi = SqlMode { no_backslash_escapes: false, ansi_quotes: true };
        assert_eq!(modes.ahead(), SqlModes::known(ansi).on(Server::MariaDb(101119)));
        // A reset forgets the mode, not the server.
        let reset = CommandPacket { command: COM_RESET_CONNECTION, payload: b"", len: 0, query_attributes: false };
        let after = modes.change(&reset);
        modes.answered(&ok(false), after, true);
        assert_eq!(modes.ahead().server(), Server::MariaDb(101119));
    }
}
