//! The prepared-statement registry of one connection: what each statement
//! id runs, so executes, fetches and closes are attributed to the SQL that
//! was prepared, and what its parameters and result columns are, so their
//! values can be read. Bounded: a client leaking statements past
//! [`MAX_STATEMENTS`] has the rest attributed to "unknown prepared statement".
//!
//! The registry stands as the server's does when the command being attributed arrives there:
//! the recorder attributes a `COM_STMT_*` command only once every command sent before it that
//! changes the registry (a prepare, a close, a reset of the session) has been answered. So an id
//! names what the server will run under it: MariaDB's "the statement just prepared" (`-1`)
//! behind a pipelined prepare, an id a server reused after a close, a statement re-prepared.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::{CommandRecord, Origin, Values};
use crate::fingerprint::{FingerprintId, LimitParams, Paging, StatementKind, hash_value, limit_number};
use crate::protocol::binary::execute_params_after_long_data;
use crate::protocol::constants::command::*;
use crate::protocol::packets::{u16_at, u32_at};

/// Prepared statements tracked per connection.
pub const MAX_STATEMENTS: usize = 4096;
/// MariaDB's "the statement I just prepared" id, for pipelined prepare+execute.
pub(crate) const LAST_PREPARED: u32 = u32::MAX;

/// Commands that change what a statement id names, once the server has answered them.
pub(super) fn changes_registry(command: u8) -> bool {
    matches!(command, COM_STMT_PREPARE | COM_STMT_CLOSE | COM_RESET_CONNECTION | COM_CHANGE_USER)
}

/// Commands that name a prepared statement by its id.
pub(super) fn names_statement(command: u8) -> bool {
    matches!(
        command,
        COM_STMT_EXECUTE
            | COM_STMT_FETCH
            | COM_STMT_CLOSE
            | COM_STMT_RESET
            | COM_STMT_SEND_LONG_DATA
            | COM_STMT_BULK_EXECUTE
    )
}

/// What a prepared statement runs.
#[derive(Clone, Debug)]
pub struct Statement {
    pub fingerprint: FingerprintId,
    pub text: Arc<str>,
    pub kind: StatementKind,
    pub paging: Option<Paging>,
    /// A `LIMIT ? OFFSET ?`: which parameters page each execution.
    pub limit_params: Option<LimitParams>,
    /// The prepare's sqlcommenter origin, which its executes share.
    pub origin: Option<Arc<Origin>>,
    pub params: u16,
    /// Parameter types from the last execute that sent them.
    pub types: Vec<(u8, u8)>,
    /// Result column types (`type`, unsigned), from the prepare or the last
    /// execute that sent metadata: fetches and cached-metadata executes
    /// send rows without it.
    pub columns: Vec<(u8, bool)>,
    /// Parameters (bit `i`: parameter `i`, the first 64) sent by `COM_STMT_SEND_LONG_DATA`
    /// since the last execute or `COM_STMT_RESET`: the next execute carries no value for them.
    pub long_data: u64,
}

/// One connection's prepared statements.
#[derive(Debug, Default)]
pub struct Statements {
    by_id: HashMap<u32, Statement>,
    last_prepared: Option<u32>,
}

impl Statements {
    /// The statement id a `COM_STMT_*` payload names (resolving MariaDB's
    /// "last prepared" id).
    pub fn id_in(&self, payload: &[u8]) -> Option<u32> {
        match u32_at(payload, 0)? {
            LAST_PREPARED => self.last_prepared,
            id => Some(id),
        }
    }

    pub fn get(&self, id: u32) -> Option<&Statement> {
        self.by_id.get(&id)
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut Statement> {
        self.by_id.get_mut(&id)
    }

    /// The server accepted a prepare under `id`.
    pub fn prepared(&mut self, id: u32, statement: Statement) {
        if self.by_id.len() < MAX_STATEMENTS || self.by_id.contains_key(&id) {
            self.by_id.insert(id, statement);
        }
        self.last_prepared = Some(id);
    }

    /// The server refused a prepare: "the statement just prepared" names none until the next
    /// one succeeds (MariaDB answers an execute of `-1` with an error).
    pub fn prepare_failed(&mut self) {
        self.last_prepared = None;
    }

    /// `COM_STMT_CLOSE`.
    pub fn closed(&mut self, id: u32) {
        self.by_id.remove(&id);
        if self.last_prepared == Some(id) {
            self.last_prepared = None;
        }
    }

    /// `COM_RESET_CONNECTION` or `COM_CHANGE_USER`: the server forgot them all.
    pub fn clear(&mut self) {
        self.by_id.clear();
        self.last_prepared = None;
    }

    /// Attributes a `COM_STMT_*` command (`payload`: after the command byte) to the statement
    /// it names, and reads what it carries: an execute's parameters (its values, its page),
    /// the parameter a `COM_STMT_SEND_LONG_DATA` fills, the long data a `COM_STMT_RESET`
    /// drops. Returns the statement id, and whether the registry knows it.
    pub fn attribute(&mut self, record: &mut CommandRecord, payload: &[u8], query_attributes: bool) -> (u32, bool) {
        let Some(id) = self.id_in(payload) else {
            // "The statement just prepared" when none was: the server refuses it.
            return (LAST_PREPARED, false);
        };
        record.statement = Some(id);
        match record.command {
            COM_STMT_EXECUTE => record.cursor = payload.get(4).is_some_and(|flags| flags & 0x07 != 0),
            COM_STMT_FETCH => record.fetch_rows = u32_at(payload, 4).unwrap_or(0),
            _ => {}
        }
        let Some(st) = self.by_id.get_mut(&id) else { return (id, false) };
        record.fingerprint = st.fingerprint;
        record.text = st.text.clone();
        record.kind = st.kind;
        record.paging = st.paging;
        record.origin = st.origin.clone();
        match record.command {
            COM_STMT_EXECUTE => {
                read_params(st, record, payload, query_attributes);
                // The server takes long data for one execute only.
                st.long_data = 0;
            }
            COM_STMT_SEND_LONG_DATA => {
                if let Some(param) = u16_at(payload, 4).filter(|&p| p < 64) {
                    st.long_data |= 1 << param;
                }
            }
            COM_STMT_RESET => st.long_data = 0,
            _ => {}
        }
        (id, true)
    }
}

/// An execute's parameters into `record`: their hashed values, and the page a
/// `LIMIT ? OFFSET ?` was bound to.
fn read_params(st: &mut Statement, record: &mut CommandRecord, payload: &[u8], query_attributes: bool) {
    let mut values = Values::default();
    let paged_by = st.limit_params.map(|l| l.placeholders()).unwrap_or_default();
    let (mut bound, mut index) = ([None; 2], 0u16);
    let count = usize::from(st.params);
    execute_params_after_long_data(payload, count, &mut st.types, query_attributes, st.long_data, |p| {
        values.push(p.canonical().map(hash_value).unwrap_or(0));
        for (slot, wanted) in bound.iter_mut().zip(paged_by) {
            if wanted == Some(index) {
                *slot = p.canonical().and_then(limit_number);
            }
        }
        index = index.saturating_add(1);
    });
    record.values = values;
    if let Some(limit) = st.limit_params {
        record.paging = limit.resolve(bound);
    }
}
