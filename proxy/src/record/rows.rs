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
    /// The first row of a result, its bytes kept rather than its values hashed: only a
    /// result of two rows or more can be a loop's parent, and most results are one row (a
    /// loop's children among them). A second row, or a second result set, hashes it.
    first_row: Vec<u8>,
    first_pending: bool,
    /// Whether the waiting row is in the binary protocol.
    first_binary: bool,
    /// The statement's columns the waiting binary row is read with when its result carried
    /// none (MariaDB's metadata cache): a second result set's rows come without them.
    first_known_columns: Vec<(u8, bool)>,
}

impl RowSample {
    /// A result set begins; only the first is sampled.
    pub fn result_set(&mut self) {
        self.result_sets += 1;
        if self.result_sets == 1 {
            self.columns.clear();
        } else {
            self.hash_first_row();
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
    #[inline(always)]
    pub fn row(&mut self, prefix: &[u8], binary: bool, known_columns: &[(u8, bool)]) {
        if self.result_sets > 1 || self.rows >= SAMPLE_ROWS {
            return;
        }
        self.rows += 1;
        if self.rows == 1 {
            self.first_row.clear();
            self.first_row.extend_from_slice(prefix);
            self.first_pending = true;
            self.first_binary = binary;
            self.first_known_columns.clear();
            if binary && self.columns.is_empty() {
                self.first_known_columns.extend_from_slice(known_columns);
            }
            return;
        }
        self.hash_first_row();
        self.sample(prefix, binary, known_columns);
    }

    /// Hashes the first row's values, if they wait.
    fn hash_first_row(&mut self) {
        if std::mem::take(&mut self.first_pending) {
            let (row, known) = (std::mem::take(&mut self.first_row), std::mem::take(&mut self.first_known_columns));
            self.sample(&row, self.first_binary, &known);
            (self.first_row, self.first_known_columns) = (row, known);
        }
    }

    /// Hashes the leading values of one row into the sample.
    fn sample(&mut self, prefix: &[u8], binary: bool, known_columns: &[(u8, bool)]) {
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
        self.first_pending = false;
        (self.result_sets, self.rows) = (0, 0);
        prepared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hashes sampling gives a text row of one value, `value`.
    fn hashed(value: &[u8]) -> Vec<u64> {
        let mut out = Vec::new();
        text_row(&[&[value.len() as u8], value].concat(), SAMPLE_COLUMNS, &mut |p: Param<'_>| {
            out.extend(p.canonical().map(hash_value));
        });
        out
    }

    fn row(s: &mut RowSample, value: &[u8]) {
        s.row(&[&[value.len() as u8], value].concat(), false, &[]);
    }

    #[test]
    fn a_first_row_is_hashed_once_the_result_can_be_a_parent() {
        let mut s = RowSample::default();
        s.result_set();
        row(&mut s, b"7");
        assert!(s.hashes.is_empty(), "one row: nothing hashed yet");
        row(&mut s, b"8");
        assert_eq!(s.hashes, [hashed(b"7"), hashed(b"8")].concat(), "in order, the first included");
        s.finish();

        // One row, then another result set: the row is sampled as it always was.
        s.result_set();
        row(&mut s, b"7");
        s.result_set();
        assert_eq!(s.hashes, hashed(b"7"));
        s.finish();

        // A single-row result leaves nothing behind for the next one.
        s.result_set();
        row(&mut s, b"9");
        s.finish();
        s.result_set();
        row(&mut s, b"7");
        row(&mut s, b"8");
        assert_eq!(s.hashes, [hashed(b"7"), hashed(b"8")].concat());
    }

    /// A binary row (header, NULL bitmap, an 8-byte integer).
    fn binary(value: i64) -> Vec<u8> {
        [&[0u8, 0][..], &value.to_le_bytes()].concat()
    }

    #[test]
    fn a_binary_first_row_waits_like_a_text_one() {
        use crate::protocol::binary::types::MYSQL_TYPE_LONGLONG;
        let mut s = RowSample::default();
        s.result_set();
        s.column(Some((MYSQL_TYPE_LONGLONG, 0)), ColumnOf::ResultSet);
        s.row(&binary(7), true, &[]);
        assert!(s.hashes.is_empty(), "one row: nothing hashed yet");
        s.row(&binary(8), true, &[]);
        // Hashed as the same values in a text row would be.
        assert_eq!(s.hashes, [hashed(b"7"), hashed(b"8")].concat());
        s.finish();

        // A second result set hashes the waiting row with the first one's columns.
        s.result_set();
        s.column(Some((MYSQL_TYPE_LONGLONG, 0)), ColumnOf::ResultSet);
        s.row(&binary(-7), true, &[]);
        s.result_set();
        assert_eq!(s.hashes, hashed(b"-7"));
        s.finish();

        // Without the result's columns (MariaDB's metadata cache) the statement's read it,
        // kept with it for a second result set.
        let known = [(MYSQL_TYPE_LONGLONG, false)];
        s.result_set();
        s.row(&binary(9), true, &known);
        assert!(s.hashes.is_empty());
        s.result_set();
        s.row(&binary(10), true, &known);
        assert_eq!(s.hashes, hashed(b"9"));
    }
}
