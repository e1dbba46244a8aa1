//! The prepared-statement registry of one connection: what each statement
//! id runs, so executes, fetches and closes are attributed to the SQL that
//! was prepared, and what its parameters and result columns are, so their
//! values can be read. Bounded: a client leaking statements past
//! [`MAX_STATEMENTS`] has the rest attributed to "unknown prepared statement".

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::Origin;
use crate::fingerprint::{FingerprintId, LimitParams, Paging, StatementKind};
use crate::protocol::packets::u32_at;

/// Prepared statements tracked per connection.
pub const MAX_STATEMENTS: usize = 4096;
/// MariaDB's "the statement I just prepared" id, for pipelined prepare+execute.
pub(crate) const LAST_PREPARED: u32 = u32::MAX;

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

    /// `COM_STMT_CLOSE`.
    pub fn closed(&mut self, id: u32) {
        self.by_id.remove(&id);
    }

    /// `COM_RESET_CONNECTION` or `COM_CHANGE_USER`: the server forgot them all.
    pub fn clear(&mut self) {
        self.by_id.clear();
        self.last_prepared = None;
    }
}
