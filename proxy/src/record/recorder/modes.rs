//! The `sql_mode` a connection's session may be in, as far as it changes how SQL lexes:
//! followed from the commands sent and the answers to them, pipelined or not.

use crate::fingerprint::{SqlMode, SqlModes, sql_mode_after};
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
}

impl Default for SessionModes {
    /// Until the server says, anything: a new session takes the global mode, which rttscope
    /// cannot see (`SET GLOBAL sql_mode` on another connection, or the server's config).
    fn default() -> Self {
        let any = SqlModes::unknown(SqlMode::default());
        SessionModes { settled: any, ahead: any, prepared_change: false }
    }
}

impl SessionModes {
    /// What the next command is read under.
    pub(super) fn ahead(&self) -> SqlModes {
        self.ahead
    }

    /// What a command does to the modes besides a query's `SET` (which `Texts::query` reads):
    /// a session reset returns them to the global mode, and an execute may run a prepared
    /// `SET sql_mode`.
    pub(super) fn change(&mut self, c: &CommandPacket<'_>) -> Option<SqlModes> {
        match c.command {
            COM_RESET_CONNECTION | COM_CHANGE_USER => Some(SqlModes::unknown(SqlMode::default())),
            COM_STMT_PREPARE => {
                self.prepared_change |= sql_mode_after(c.payload, self.ahead) != self.ahead;
                None
            }
            COM_STMT_EXECUTE if self.prepared_change => Some(SqlModes::unknown(self.ahead.likely())),
            _ => None,
        }
    }

    /// A command went up, read under `mode`, after which the session may be in `after`: only a
    /// command that may change the modes is followed, and the next is read under both.
    pub(super) fn sent(&mut self, mode: SqlModes, after: Option<SqlModes>) -> Option<SqlModes> {
        let after = after.filter(|a| *a != mode);
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
