//! Rows sampled from each response, for linking an N+1 loop to the query
//! whose results it iterates: hashes of the leading values of the first
//! rows. Bounded: a few values of a few rows, buffers reused from command
//! to command.

use crate::fingerprint::hash_value;
use crate::protocol::ColumnOf;
use crate::protocol::binary::{Param, UNSIGNED_FLAG, binary_row, text_row, types::MYSQL_TYPE_NULL};

/// Rows sampled per response.
const SAMPLE_ROWS: usize = 64;
/// Leading columns sampled per row.
const SAMPLE_COLUMNS: usize = 4;
/// Longer values are not keys.
const SAMPLE_MAX_VALUE: usize = 40;
/// Marks a column whose type could not be read (long names past the
/// prefix); `MYSQL_TYPE_NULL` never describes a real result column.
const UNKNOWN_TYPE: u8 = MYSQL_TYPE_NULL;

/// The sample of the response being received.
#[derive(Debug, Default)]
pub struct RowSample {
    /// Column types of the first result set, when known.
    pub columns: Vec<(u8, bool)>,
    /// Columns of a statement being prepared.
    pub prepared: Vec<(u8, bool)>,
    result_sets: u32,
    rows: usize,
    pub hashes: Vec<u64>,
}

impl RowSample {
    /// A result set begins; only the first is sampled.
    pub fn result_set(&mut self) {
        self.result_sets += 1;
        if self.result_sets == 1 {
            self.columns.clear();
        }
    }

    /// A column definition, with its type and flags when readable.
    pub fn column(&mut self, type_and_flags: Option<(u8, u16)>, of: ColumnOf) {
        let column = type_and_flags.map(|(ty, flags)| (ty, flags & UNSIGNED_FLAG != 0));
        // An unreadable type leaves a marker that stops binary sampling there.
        let column = column.unwrap_or((UNKNOWN_TYPE, false));
        match of {
            ColumnOf::ResultSet if self.result_sets == 1 => self.columns.push(column),
            ColumnOf::ResultSet => {}
            ColumnOf::PreparedStatement => self.prepared.push(column),
        }
    }

    /// A row: its first bytes, in the binary protocol when `binary`, read
    /// with `known_columns` when the response carried no metadata.
    pub fn row(&mut self, prefix: &[u8], binary: bool, known_columns: &[(u8, bool)]) {
        if self.result_sets > 1 || self.rows >= SAMPLE_ROWS {
            return;
        }
        self.rows += 1;
        let hashes = &mut self.hashes;
        let mut keep = |p: Param<'_>| {
            if let Some(v) = p.canonical().filter(|v| v.len() <= SAMPLE_MAX_VALUE) {
                hashes.push(hash_value(v));
            }
        };
        if binary {
            let columns = if self.columns.is_empty() { known_columns } else { &self.columns };
            // Stop at the first column whose type is unknown.
            let known = columns.iter().take_while(|(ty, _)| *ty != UNKNOWN_TYPE).count();
            binary_row(prefix, &columns[..known], SAMPLE_COLUMNS.min(known), &mut keep);
        } else {
            text_row(prefix, SAMPLE_COLUMNS, &mut keep);
        }
    }

    /// The response ended: the prepared columns it announced, and the
    /// sample emptied for the next (its buffers kept).
    pub fn finish(&mut self) -> Vec<(u8, bool)> {
        let prepared = std::mem::take(&mut self.prepared);
        self.hashes.clear();
        self.columns.clear();
        (self.result_sets, self.rows) = (0, 0);
        prepared
    }
}
