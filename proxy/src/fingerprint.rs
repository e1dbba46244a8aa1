//! SQL fingerprints: literals → `?`, lists collapsed, comments folded; stable 64-bit ids.
//!
//! A fingerprint groups every execution of "the same query" whatever its literal values, the
//! way `pt-query-digest` does. It runs on the proxy's hot path, so it is a single pass of a
//! byte lexer over the statement (no SQL parser, no regex) into buffers the [`Fingerprinter`]
//! keeps between calls: once they have grown, fingerprinting allocates nothing.
//!
//! # Canonical form
//!
//! | input | normalised |
//! |---|---|
//! | numbers, signed numbers (`-1` after an operator, `(`, `,`, a keyword or at the start), `1e10`, `.5`, strings `'..'` `".."`, `x'0A'` `0x0A` `b'01'` `0b01` `N'..'`, `_utf8mb4'..'`, `TRUE` `FALSE` `NULL` | `?` |
//! | `a-1` (binary minus) | `a-?` |
//! | `IS NULL`, `IS NOT TRUE`, `NOT NULL` | `is null`, `is not true`, `not null` |
//! | an existing `?` placeholder | `?` (`:name` and `$1` are not MySQL and pass through) |
//! | `IN (1, 2, 3)`, `IN (?)`, `IN ((1,2),(3,4))` | `in(?+)` |
//! | `IN (SELECT ...)` | `in (select ...)` — not collapsed |
//! | `VALUES (1,'a'), (2,'b')` | `values(?+)` |
//! | `VALUES (1, NOW()), (2, NOW())` | `values (?, now())` — repeats of the first tuple dropped |
//! | `LIMIT 10`, `LIMIT 20, 10`, `LIMIT 10 OFFSET 20` | `limit ?`, `limit ?, ?`, `limit ? offset ?` (the numbers are [`Fingerprint::paging`]; placeholders there, [`Fingerprint::limit_params`]) |
//! | keywords and unquoted identifiers | lower case |
//! | `` `Backticked Name` `` | kept verbatim, backticks included (unambiguous, as in pt-query-digest) |
//! | `/* */`, `/*! */`, `-- ` and `#` comments | removed (read for sqlcommenter tags first) |
//! | `/*+ INDEX(t i) */` optimizer hints | kept, normalised like the rest: `/*+ index(t i) */` |
//! | `"..."` | `?`, whether a string or (under `ANSI_QUOTES`) a name: see [`SqlMode`] |
//! | the SQL in an executable comment (`/*!40101 SET ... */`) | removed, but read as SQL: a `*/` in one of its strings does not end it |
//! | a versioned comment the server skips (`/*!99999 ... */` on an older one: see [`Server`]) | removed, as a comment that ends at its first `*/` |
//! | a versioned comment the server may run or skip (its version not known), and all after it | one `?` |
//! | under a mode not known for sure ([`SqlModes`]), a run of tokens some reading puts in a literal or comment | one `?` |
//! | whitespace runs | one space; none after `(` or before `,` `)`; always one after `,` |
//! | `SELECT 1; SELECT 2;` | `select ?; select ?` (empty statements and the final `;` dropped) |
//!
//! Bytes that are not UTF-8 are part of the value inside a string literal, and become U+FFFD
//! elsewhere. Input cut off by the capture limit still fingerprints sensibly: an unterminated
//! string or comment runs to the end, an open all-literal `IN (` list collapses, and a partial
//! trailing `VALUES` tuple is dropped, so a truncated bulk insert keeps the id of the whole.

mod assign;
mod facts;
mod lexer;
mod mode;
mod normalise;
mod readings;
mod server;
mod sqlcommenter;
mod summary;
mod trace;
mod value;
mod write;

#[cfg(test)]
mod privacy_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

pub use mode::{SqlMode, SqlModes};
pub use server::Server;
pub use sqlcommenter::{Tags, decode as decode_tag};
pub use summary::{MAX_SUMMARY, summary};

/// At most this many literal values are hashed into [`Fingerprint::values`].
pub const MAX_VALUES: usize = 16;

/// Stable 64-bit id of a normalised statement: xxh3-64 of the normalised text.
///
/// Displayed and parsed as 16 lower-case hex digits; changing the hash or the normalisation
/// changes every id, which a test pins.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct FingerprintId(pub u64);

impl fmt::Display for FingerprintId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A string that is not exactly 16 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a fingerprint id is 16 hex digits")]
pub struct ParseFingerprintIdError;

impl FromStr for FingerprintId {
    type Err = ParseFingerprintIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // from_str_radix alone would take a sign or a short id; a short id is a copy-paste error.
        if s.len() != 16 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(ParseFingerprintIdError);
        }
        u64::from_str_radix(s, 16).map(FingerprintId).map_err(|_| ParseFingerprintIdError)
    }
}

/// The statement's verb, from its first keyword (after comments and leading parentheses;
/// `WITH ... SELECT` is a `Select`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum StatementKind {
    /// `SELECT`, also after leading `(` or a `WITH` clause.
    Select,
    /// `INSERT`, including `INSERT ... SELECT`.
    Insert,
    /// `UPDATE`, also after a `WITH` clause.
    Update,
    /// `DELETE`, also after a `WITH` clause.
    Delete,
    /// MySQL's `REPLACE` (delete-then-insert), not the string function.
    Replace,
    /// A stored-procedure `CALL`.
    Call,
    /// Anything else: DDL, `SET`, `SHOW`, transaction control, or no keyword at all; and
    /// a statement not classed yet.
    #[default]
    Other,
}

impl StatementKind {
    /// Lower-case name, for reports and metric labels.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            StatementKind::Select => "select",
            StatementKind::Insert => "insert",
            StatementKind::Update => "update",
            StatementKind::Delete => "delete",
            StatementKind::Replace => "replace",
            StatementKind::Call => "call",
            StatementKind::Other => "other",
        }
    }
}

/// The W3C trace id of a `traceparent` value (`00-<trace>-<span>-01`), as a number: how a
/// `traceparent` query attribute links statements of one request, as the comment does.
pub fn traceparent(value: &[u8]) -> Option<u128> {
    let id = trace::bare_value(value)?;
    u128::from_str_radix(std::str::from_utf8(&id).ok()?, 16).ok()
}

/// A top-level trailing `LIMIT` with literal numbers: `LIMIT count`, `LIMIT offset, count` or
/// `LIMIT count OFFSET offset`. Pages of one pagination loop share an id and differ here.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Paging {
    /// Rows per page: the `LIMIT` row count.
    pub count: u64,
    /// Rows skipped before the page; 0 when the `LIMIT` has no offset.
    pub offset: u64,
}

/// One number of a trailing `LIMIT`: a literal, or the `?` placeholder a prepared statement
/// binds it to (its index among the statement's placeholders, from 0).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum LimitArg {
    /// A number written in the SQL text.
    Literal(u64),
    /// The 0-based index of the `?` placeholder, among all of the statement's placeholders.
    Param(u16),
}

/// A trailing `LIMIT` with a placeholder in it (`LIMIT ? OFFSET ?`, `LIMIT 50 OFFSET ?`): the
/// paging of each execution is in the parameters bound to it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct LimitParams {
    /// The row count; in `LIMIT offset, count` the second number.
    pub count: LimitArg,
    /// Rows skipped; `Literal(0)` when the `LIMIT` has no offset.
    pub offset: LimitArg,
}

impl LimitParams {
    /// The parameter indexes of the count and the offset, where they are placeholders.
    pub fn placeholders(&self) -> [Option<u16>; 2] {
        let index = |a: LimitArg| match a {
            LimitArg::Param(i) => Some(i),
            LimitArg::Literal(_) => None,
        };
        [index(self.count), index(self.offset)]
    }

    /// The paging of one execution, given the integers bound to [`Self::placeholders`].
    pub fn resolve(&self, bound: [Option<u64>; 2]) -> Option<Paging> {
        let value = |a: LimitArg, bound: Option<u64>| match a {
            LimitArg::Literal(n) => Some(n),
            LimitArg::Param(_) => bound,
        };
        Some(Paging { count: value(self.count, bound[0])?, offset: value(self.offset, bound[1])? })
    }
}

/// A parameter's canonical text as a LIMIT number: plain decimal digits, nothing else.
pub fn limit_number(canonical: &[u8]) -> Option<u64> {
    facts::parse_u64(canonical)
}

/// One statement's fingerprint, borrowing the [`Fingerprinter`]'s buffers until the next call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Fingerprint<'a> {
    /// [`hash_value`] of [`Self::text`]: what groups executions of the same statement.
    pub id: FingerprintId,
    /// The normalised text the id hashes.
    pub text: &'a str,
    /// Kind of the first statement.
    pub kind: StatementKind,
    /// [`hash_value`] of the canonical form of each literal, in order of appearance (placeholders
    /// have none), at most [`MAX_VALUES`]. Canonical forms: quotes and escapes removed, hex and
    /// bit literals decoded to bytes, numbers as written with a `-` sign kept and a `+` dropped,
    /// `TRUE`/`FALSE` as `1`/`0`, `NULL` as `NULL`.
    pub values: &'a [u64],
    /// The first statement's top-level trailing `LIMIT`, when its numbers are literals.
    pub paging: Option<Paging>,
    /// The same `LIMIT` when a placeholder is in it: which parameters page the result.
    pub limit_params: Option<LimitParams>,
    /// Rows in the first statement's `INSERT`/`REPLACE ... VALUES` (complete tuples only, so
    /// fewer than sent if the capture was truncated); 0 for any other statement.
    pub rows_in_values: u32,
    /// The 32-hex-digit W3C trace id from a `traceparent` in any comment (sqlcommenter style).
    pub trace: Option<&'a str>,
    /// Where in the input (from, to) the body of the first sqlcommenter comment is (leading,
    /// trailing or anywhere else): read its pairs with [`Tags::of`].
    pub tags: Option<(usize, usize)>,
}

/// Normalises statements into reusable buffers; keep one per task, not one per query.
pub struct Fingerprinter {
    /// The normalised text, UTF-8 by construction: bytes, so a word is copied without being
    /// decoded into characters.
    text: Vec<u8>,
    values: Vec<u64>,
    scratch: Vec<u8>,
    trace: [u8; 32],
    /// What the other readings hide, when the mode is not known for sure.
    mask: readings::Mask,
}

impl Default for Fingerprinter {
    fn default() -> Self {
        Self::new()
    }
}

impl Fingerprinter {
    /// Preallocates 1 KiB of text buffer, so most statements never grow it.
    #[must_use]
    pub fn new() -> Self {
        Self {
            text: Vec::with_capacity(1024),
            values: Vec::with_capacity(MAX_VALUES),
            scratch: Vec::with_capacity(256),
            trace: [0; 32],
            mask: readings::Mask::default(),
        }
    }

    /// Fingerprints one `COM_QUERY` payload (or any SQL text) under the default `sql_mode`;
    /// never fails, never panics.
    pub fn fingerprint(&mut self, sql: &[u8]) -> Fingerprint<'_> {
        self.fingerprint_in(sql, SqlMode::default())
    }

    /// Fingerprints `sql` as the server reads it under `modes`: when that is more than one mode
    /// (or the text changes the mode in a way it cannot tell), as every reading, each token some
    /// reading puts inside a literal or a comment written as `?`.
    ///
    /// Only a text with a backslash can read differently, so with one mode and none of those,
    /// or with no backslash at all, it is the one pass [`Fingerprinter::fingerprint`] makes.
    /// So is a text with a versioned comment (`/*!50700 ... */`) the server runs or skips for
    /// certain ([`SqlModes::server`]); one it may do either with is read a second time, and
    /// every token from it on is hidden.
    pub fn fingerprint_in(&mut self, sql: &[u8], modes: impl Into<SqlModes>) -> Fingerprint<'_> {
        let modes = modes.into();
        let mut masked = !modes.is_known() && sql.contains(&b'\\') && self.read_all(sql, modes);
        let mut summary = self.normalise(sql, modes, masked);
        let guessed = summary.guessed && sql.contains(&b'\\');
        if !masked && (guessed || summary.doubt) && self.read_all(sql, modes) {
            masked = true;
            summary = self.normalise(sql, modes, masked);
        }
        let trace = if summary.trace { std::str::from_utf8(&self.trace).ok() } else { None };
        Fingerprint {
            id: FingerprintId(hash_value(&self.text)),
            // Valid by construction: every byte written is ASCII, part of a valid sequence of
            // the input, or U+FFFD (a bug here would show an empty text, not panic).
            text: std::str::from_utf8(&self.text).unwrap_or_default(),
            kind: summary.kind,
            values: &self.values,
            paging: summary.limit.and_then(|l| l.literal()),
            limit_params: summary.limit.and_then(|l| l.params()),
            rows_in_values: summary.rows_in_values,
            trace,
            tags: summary.tags,
        }
    }
}

impl Fingerprinter {
    /// Reads `sql` every way `modes` allows into the mask; whether the readings differ.
    fn read_all(&mut self, sql: &[u8], modes: SqlModes) -> bool {
        readings::read_all(sql, modes, Some(&mut self.mask)).forked
    }

    fn normalise(&mut self, sql: &[u8], modes: SqlModes, masked: bool) -> normalise::Summary {
        self.text.clear();
        self.values.clear();
        let buffers = normalise::Buffers {
            text: &mut self.text,
            values: &mut self.values,
            scratch: &mut self.scratch,
            trace: &mut self.trace,
        };
        normalise::normalise(sql, modes.likely(), modes.server(), masked.then_some(&self.mask), buffers)
    }
}

/// The modes the session may be in after `sql` runs, from `before`, if any statement in it
/// may change them (even back to what they were: a failure between two changes leaves the
/// first): a literal `SET sql_mode` makes it one, anything that may change it in a way
/// rttscope cannot tell makes it any (see [`SqlModes`]). `None` when nothing in it does.
#[must_use]
pub fn sql_mode_after(sql: &[u8], before: SqlModes) -> Option<SqlModes> {
    // Every statement that may change the mode names `sql_mode` or is an `EXECUTE`: most
    // texts are passed over with one scan, without a lexer.
    if !names_sql_mode_or_execute(sql) {
        return None;
    }
    let outcome = readings::read_all(sql, before, None);
    outcome.changes.then_some(outcome.after)
}

/// Whether `sql` holds `sql_mode` or `execute`, in any case. Why by their second letters: `q`
/// and `x` are rare in SQL, so a text is passed over at a few instructions a byte, where
/// comparing both words at every offset took about 18 (740 for a point select's 40 bytes, on
/// every text a connection's cache had not seen).
fn names_sql_mode_or_execute(sql: &[u8]) -> bool {
    let holds_at =
        |start: usize, word: &[u8]| sql.get(start..start + word.len()).is_some_and(|w| w.eq_ignore_ascii_case(word));
    sql.iter().enumerate().skip(1).any(|(i, &b)| match b | 0x20 {
        b'q' => holds_at(i - 1, b"sql_mode"),
        b'x' => holds_at(i - 1, b"execute"),
        _ => false,
    })
}

/// The names (words, backticked names) in `sql` read under `mode` alone by `server`: for fuzz
/// oracles.
#[cfg(feature = "test-util")]
#[must_use]
pub fn names(sql: &[u8], mode: SqlMode, server: Server) -> Vec<Vec<u8>> {
    readings::names(sql, mode, server)
}

/// The hash behind [`Fingerprint::values`] (xxh3-64), public so the relay can hash a result-set
/// cell or a binary-protocol parameter rendered as text and compare it with a query's literals.
#[must_use]
pub fn hash_value(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}
