//! Undersized fetch batches: a server-side cursor read a few rows per
//! `COM_STMT_FETCH`, one round trip each.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::{min_known, Detail, Finding, Kind, Scope};
use crate::fingerprint::{FingerprintId, StatementKind};
use crate::protocol::constants::command::*;
use crate::record::CommandRecord;

/// Cursors tracked at once (per connection and statement).
const MAX_CURSORS: usize = 4096;

#[derive(Clone, Debug)]
pub struct Cursor {
    conn: u64,
    fingerprint: FingerprintId,
    text: Arc<str>,
    kind: StatementKind,
    /// Rows asked for by the last fetch.
    pub fetch_size: u32,
    pub fetches: u64,
    pub rows: u64,
    round_trips: u64,
    time_us: u64,
    bytes: u64,
    first_us: u64,
    last_us: u64,
    rtt_us: u32,
}

impl Cursor {
    pub fn to_finding(&self) -> Finding {
        Finding {
            kind: Kind::UndersizedFetch,
            fingerprint: self.fingerprint,
            text: self.text.clone(),
            statement_kind: self.kind,
            parent: None,
            scope: Scope::Connection(self.conn),
            occurrences: 1,
            executions: self.fetches,
            round_trips: self.round_trips,
            time_us: self.last_us.saturating_sub(self.first_us),
            busy_us: self.time_us,
            bytes: self.bytes,
            rows: self.rows,
            detail: Detail::Fetch { fetch_size: self.fetch_size },
            per_conn: vec![(self.conn, self.round_trips)],
            rtt_us: self.rtt_us,
        }
    }
}

#[derive(Default)]
pub struct Cursors {
    open: HashMap<(u64, u32), Cursor>,
}

impl Cursors {
    /// Follows cursor traffic; returns a cursor that just ended.
    pub fn add(&mut self, r: &CommandRecord) -> Option<Cursor> {
        let key = (r.conn_id, r.statement?);
        match r.command {
            COM_STMT_EXECUTE => {
                let ended = self.open.remove(&key);
                if r.cursor && r.error.is_none() && r.columns > 0 && self.open.len() < MAX_CURSORS {
                    self.open.insert(
                        key,
                        Cursor {
                            conn: r.conn_id,
                            fingerprint: r.fingerprint,
                            text: r.text.clone(),
                            kind: r.kind,
                            fetch_size: 0,
                            fetches: 0,
                            rows: 0,
                            round_trips: 0,
                            time_us: 0,
                            bytes: 0,
                            first_us: r.last_byte_us,
                            last_us: r.last_byte_us,
                            rtt_us: r.rtt_us,
                        },
                    );
                }
                ended
            }
            COM_STMT_FETCH => {
                let cursor = self.open.get_mut(&key)?;
                cursor.fetch_size = r.fetch_rows;
                cursor.fetches += 1;
                cursor.rows += r.rows;
                cursor.round_trips += u64::from(r.round_trips);
                cursor.time_us += r.latency_us();
                cursor.bytes += r.bytes_up + r.bytes_down;
                cursor.last_us = r.last_byte_us;
                cursor.rtt_us = min_known(cursor.rtt_us, r.rtt_us);
                // A short batch is the last one.
                (r.rows < u64::from(r.fetch_rows) || r.error.is_some()).then(|| self.open.remove(&key)).flatten()
            }
            COM_STMT_CLOSE | COM_STMT_RESET => self.open.remove(&key),
            _ => None,
        }
    }

    pub fn close_connection(&mut self, conn: u64) -> Vec<Cursor> {
        let keys: Vec<_> = self.open.keys().filter(|(c, _)| *c == conn).copied().collect();
        keys.into_iter().filter_map(|k| self.open.remove(&k)).collect()
    }

    pub fn open(&self) -> impl Iterator<Item = &Cursor> {
        self.open.values()
    }

    pub fn clear(&mut self) {
        self.open.clear();
    }
}
