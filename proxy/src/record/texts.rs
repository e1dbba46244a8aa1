//! SQL into a record: the fingerprint, its facts (kind, paging, hashed
//! values, trace id) and the normalised text, which a connection keeps at
//! hand so that a repeated statement costs a refcount, not an allocation.
//!
//! Most connections send the same few statement texts over and over (`SELECT 1` from a pool's
//! health check, the ORM's lookups by id through prepared statements), so the facts of the last
//! texts seen are kept by their raw bytes: a repeat costs a hash and a compare, not the
//! normaliser's pass. The fingerprint is a function of the bytes and the `sql_mode` alone, so a
//! hit gives exactly what the normaliser would.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::origin::Origins;
use super::statements::Statement;
use super::{CommandRecord, Origin, Values};
use crate::fingerprint::{
    FingerprintId, Fingerprinter, LimitParams, Paging, SqlModes, StatementKind, hash_value, sql_mode_after,
};

/// Normalised texts a connection keeps; cleared when full.
const TEXT_CACHE: usize = 512;
/// Longest literal example kept (`report.examples`).
const MAX_EXAMPLE: usize = 1024;
/// Raw statement texts whose facts a connection keeps: direct-mapped slots, chosen by the hash
/// of the bytes, a newer text taking an older one's slot.
const RAW_SLOTS: usize = 32;
/// Longest raw text kept in a slot; longer statements are fingerprinted every time. A slot's
/// copy only grows, to at most this: the raw cache holds at most `RAW_SLOTS × RAW_MAX` bytes
/// (32 KiB) per connection, and allocates only while a slot grows to the longest text it held.
const RAW_MAX: usize = 1024;

/// What the normaliser learned of one text, as a record takes it.
#[derive(Clone, Debug)]
struct Facts {
    fingerprint: FingerprintId,
    text: Arc<str>,
    kind: StatementKind,
    paging: Option<Paging>,
    limit_params: Option<LimitParams>,
    rows_in_values: u32,
    trace: Option<u128>,
    /// Where the first sqlcommenter comment's body is in the raw text.
    tags: Option<(usize, usize)>,
    values: Values,
}

/// One raw text and its facts.
#[derive(Debug, Default)]
struct Slot {
    /// `hash_value` of `raw`.
    hash: u64,
    mode: SqlModes,
    raw: Vec<u8>,
    /// `None` until the slot is first filled.
    facts: Option<Facts>,
    /// `sql_mode_after(raw, mode)`, once a `COM_QUERY` asked for it.
    after: Option<Option<SqlModes>>,
}

impl Slot {
    /// Whether it holds the facts of `sql` under `mode`.
    fn holds(&self, sql: &[u8], mode: SqlModes) -> bool {
        self.facts.is_some() && self.mode == mode && self.raw == sql
    }
}

/// One connection's fingerprinter and its caches of normalised and raw texts.
pub struct Texts {
    fingerprinter: Fingerprinter,
    cache: HashMap<FingerprintId, Arc<str>>,
    /// [`RAW_SLOTS`] slots.
    raw: Box<[Slot]>,
    /// The slot looked up last: looked at first, before the text is hashed.
    last: Option<usize>,
    origins: Origins,
    /// Capture literal examples (`report.examples`).
    examples: bool,
}

impl Texts {
    pub fn new(examples: bool) -> Texts {
        Texts {
            fingerprinter: Fingerprinter::new(),
            cache: HashMap::default(),
            raw: std::iter::repeat_with(Slot::default).take(RAW_SLOTS).collect(),
            last: None,
            origins: Origins::default(),
            examples,
        }
    }

    /// A pseudo-fingerprint for commands that carry no SQL (`COM_PING`).
    pub fn named(&mut self, name: &str) -> (FingerprintId, Arc<str>) {
        let id = FingerprintId(hash_value(name.as_bytes()));
        (id, cached(&mut self.cache, id, name).0)
    }

    /// Fingerprints `sql`, read as the server reads it under `mode`, into `record`; returns
    /// the statement's facts, for a prepare to remember.
    pub fn sql(&mut self, record: &mut CommandRecord, sql: &[u8], mode: SqlModes) -> Statement {
        let (found, first_time) = self.look_up(sql, mode);
        let fresh;
        let facts = match found.facts(&self.raw) {
            Some(facts) => facts,
            // Not reached: a slot just looked up holds its facts.
            None => {
                fresh = self.fingerprint(sql, mode).0;
                &fresh
            }
        };
        let origin = fill(record, sql, facts, first_time, &mut self.origins, self.examples);
        Statement {
            fingerprint: facts.fingerprint,
            text: facts.text.clone(),
            kind: facts.kind,
            paging: facts.paging,
            limit_params: facts.limit_params,
            origin,
            params: 0,
            types: Vec::new(),
            columns: Vec::new(),
            long_data: 0,
        }
    }

    /// A `COM_QUERY`: fingerprints `sql` into `record` as [`Texts::sql`] does, and returns
    /// the modes the session may be in once it has run, if it may change them ([`sql_mode_after`]).
    #[inline(always)]
    pub fn query(&mut self, record: &mut CommandRecord, sql: &[u8], mode: SqlModes) -> Option<SqlModes> {
        let (found, first_time) = self.look_up(sql, mode);
        if let Some(facts) = found.facts(&self.raw) {
            fill(record, sql, facts, first_time, &mut self.origins, self.examples);
        }
        match found {
            Found::Slot(i) => *self.raw[i].after.get_or_insert_with(|| sql_mode_after(sql, mode)),
            Found::Owned(_) => sql_mode_after(sql, mode),
        }
    }

    /// The facts of `sql` under `mode`, and whether its normalised text is new to the
    /// connection: in a raw slot if it is short enough to be kept.
    #[inline(always)]
    fn look_up(&mut self, sql: &[u8], mode: SqlModes) -> (Found, bool) {
        if sql.len() > RAW_MAX {
            let (facts, first_time) = self.fingerprint(sql, mode);
            return (Found::Owned(Box::new(facts)), first_time);
        }
        // The text before, again (a loop, a pool's health check): found without hashing it.
        let i = match self.last.filter(|&i| self.raw.get(i).is_some_and(|slot| slot.holds(sql, mode))) {
            Some(i) => i,
            None => {
                let hash = hash_value(sql);
                let i = (hash % RAW_SLOTS as u64) as usize;
                self.last = Some(i);
                let slot = &self.raw[i];
                if !(slot.hash == hash && slot.holds(sql, mode)) {
                    return (Found::Slot(i), self.fill_slot(i, hash, sql, mode));
                }
                i
            }
        };
        // The normalised text may have left the text cache since: new again, as it
        // would be had the normaliser run. Only examples ask whether a text is new:
        // without them a hit costs no second look-up.
        let first_time = self.examples
            && self.raw[i].facts.as_ref().is_some_and(|facts| known(&mut self.cache, facts.fingerprint, &facts.text));
        (Found::Slot(i), first_time)
    }

    /// Fingerprints `sql` into raw slot `i`, in place of the text it held; returns whether
    /// its normalised text is new to the connection.
    fn fill_slot(&mut self, i: usize, hash: u64, sql: &[u8], mode: SqlModes) -> bool {
        let (facts, first_time) = self.fingerprint(sql, mode);
        let slot = &mut self.raw[i];
        slot.hash = hash;
        slot.mode = mode;
        slot.raw.clear();
        slot.raw.reserve_exact(sql.len());
        slot.raw.extend_from_slice(sql);
        slot.facts = Some(facts);
        slot.after = None;
        first_time
    }

    /// Runs the normaliser over `sql`.
    fn fingerprint(&mut self, sql: &[u8], mode: SqlModes) -> (Facts, bool) {
        let fp = self.fingerprinter.fingerprint_in(sql, mode);
        let trace = fp.trace.and_then(|t| u128::from_str_radix(t, 16).ok());
        let mut values = Values::default();
        for &v in fp.values {
            values.push(v);
        }
        let (text, first_time) = cached(&mut self.cache, fp.id, fp.text);
        let facts = Facts {
            fingerprint: fp.id,
            text,
            kind: fp.kind,
            paging: fp.paging,
            limit_params: fp.limit_params,
            rows_in_values: fp.rows_in_values,
            trace,
            tags: fp.tags,
            values,
        };
        (facts, first_time)
    }
}

/// Where a text's facts are: in its raw slot, or (a text too long to keep) here.
enum Found {
    Slot(usize),
    Owned(Box<Facts>),
}

impl Found {
    fn facts<'a>(&'a self, raw: &'a [Slot]) -> Option<&'a Facts> {
        match self {
            Found::Slot(i) => raw.get(*i).and_then(|s| s.facts.as_ref()),
            Found::Owned(facts) => Some(facts),
        }
    }
}

/// Writes `facts` of `sql` into `record`; returns its origin, which `origins` reads from the
/// text's sqlcommenter tags.
#[inline(always)]
fn fill(
    record: &mut CommandRecord,
    sql: &[u8],
    facts: &Facts,
    first_time: bool,
    origins: &mut Origins,
    examples: bool,
) -> Option<Arc<Origin>> {
    let origin = facts.tags.and_then(|(from, to)| sql.get(from..to)).and_then(|c| origins.of(c));
    if first_time && examples {
        let sql = &sql[..sql.len().min(MAX_EXAMPLE)];
        record.example = Some(String::from_utf8_lossy(sql).into());
    }
    record.fingerprint = facts.fingerprint;
    record.text = facts.text.clone();
    record.kind = facts.kind;
    record.paging = facts.paging;
    record.rows_in_values = facts.rows_in_values;
    record.trace = facts.trace;
    record.origin = origin.clone();
    record.values = facts.values;
    origin
}

/// The shared copy of a normalised text; allocates only the first time a
/// connection sees it. A free function over the cache alone, so it can be
/// called while the fingerprinter's scratch is still borrowed. Also says
/// whether this was the first time (a cache miss).
fn cached(cache: &mut HashMap<FingerprintId, Arc<str>>, id: FingerprintId, text: &str) -> (Arc<str>, bool) {
    if let Some(t) = cache.get(&id) {
        return (t.clone(), false);
    }
    if cache.len() >= TEXT_CACHE {
        cache.clear();
    }
    let t: Arc<str> = Arc::from(text);
    cache.insert(id, t.clone());
    (t, true)
}

/// [`cached`] for a text already shared: puts it back if the cache has dropped it since,
/// and says so (the first time again), as `cached` would have.
fn known(cache: &mut HashMap<FingerprintId, Arc<str>>, id: FingerprintId, text: &Arc<str>) -> bool {
    if cache.contains_key(&id) {
        return false;
    }
    if cache.len() >= TEXT_CACHE {
        cache.clear();
    }
    cache.insert(id, text.clone());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::SqlMode;

    fn record() -> CommandRecord {
        CommandRecord::new(1, 3, FingerprintId(0), Arc::from(""), 0)
    }

    /// What a record and the returned statement say, as a comparable string.
    fn seen(texts: &mut Texts, sql: &str, mode: impl Into<SqlModes>) -> (String, Option<SqlModes>) {
        let mode = mode.into();
        let mut r = record();
        let after = texts.query(&mut r, sql.as_bytes(), mode);
        let mut p = record();
        let st = texts.sql(&mut p, sql.as_bytes(), mode);
        let facts = format!(
            "{:?} {} {:?} {:?} {} {:?} {:?} {:?} | {:?} {} {:?} {:?} {:?} {:?}",
            r.fingerprint,
            r.text,
            r.kind,
            r.paging,
            r.rows_in_values,
            r.trace,
            r.origin,
            r.values,
            st.fingerprint,
            st.text,
            st.kind,
            st.paging,
            st.limit_params,
            st.origin
        );
        (facts, after)
    }

    const STATEMENTS: [&str; 6] = [
        "SELECT 1",
        "select * from t where id in (1, 2, 3) limit 10 offset 20",
        "SELECT a FROM t LIMIT ? OFFSET ? /*traceparent='00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',controller='orders'*/",
        "INSERT INTO t VALUES (1,'a'), (2,'b')",
        "SET SESSION sql_mode = 'ANSI_QUOTES'",
        "SET sql_mode = DEFAULT",
    ];

    #[test]
    fn a_hit_gives_what_a_miss_gives() {
        let mut texts = Texts::new(false);
        for mode in [SqlMode::default(), SqlMode { no_backslash_escapes: true, ansi_quotes: true }] {
            for sql in STATEMENTS {
                // A fresh connection's first sight of the text is a miss; then hits.
                let miss = seen(&mut Texts::new(false), sql, mode);
                for _ in 0..3 {
                    assert_eq!(seen(&mut texts, sql, mode), miss, "{sql} under {mode:?}");
                }
            }
        }
    }

    #[test]
    fn the_same_bytes_under_another_mode_are_another_entry() {
        let sql = r"SELECT 'a\', 'b'";
        let mut texts = Texts::new(false);
        let plain = seen(&mut texts, sql, SqlMode::default());
        let strict = seen(&mut texts, sql, SqlMode { no_backslash_escapes: true, ansi_quotes: false });
        assert_ne!(plain.0, strict.0);
        assert_eq!(plain, seen(&mut Texts::new(false), sql, SqlMode::default()));
    }

    #[test]
    fn an_example_is_taken_the_first_time_a_normalised_text_is_seen() {
        let mut texts = Texts::new(true);
        let mut first = record();
        texts.sql(&mut first, b"SELECT 1", SqlMode::default().into());
        assert_eq!(first.example.as_deref(), Some("SELECT 1"));
        let mut again = record();
        texts.sql(&mut again, b"SELECT 1", SqlMode::default().into());
        assert_eq!(again.example, None);
        // Another text of the same statement: not the first time.
        let mut other = record();
        texts.sql(&mut other, b"SELECT 2", SqlMode::default().into());
        assert_eq!(other.example, None);
        // Once the text cache has let it go, a hit takes an example again, as a miss would.
        texts.cache.clear();
        let mut later = record();
        texts.sql(&mut later, b"SELECT 1", SqlMode::default().into());
        assert_eq!(later.example.as_deref(), Some("SELECT 1"));
    }

    #[test]
    fn the_raw_cache_is_bounded() {
        let mut texts = Texts::new(false);
        for i in 0..(RAW_SLOTS * 8) {
            let sql = format!("SELECT {i} FROM t{i} WHERE c = '{}'", "x".repeat(i * 7));
            let mut r = record();
            texts.sql(&mut r, sql.as_bytes(), SqlMode::default().into());
            let (fresh, _) = seen(&mut Texts::new(false), &sql, SqlMode::default());
            assert_eq!(seen(&mut texts, &sql, SqlMode::default()).0, fresh);
        }
        assert_eq!(texts.raw.len(), RAW_SLOTS);
        for slot in texts.raw.iter() {
            assert!(slot.raw.len() <= RAW_MAX && slot.raw.capacity() <= RAW_MAX, "{}", slot.raw.capacity());
        }
        // Longer texts are fingerprinted each time, never kept.
        assert!(texts.raw.iter().all(|s| s.raw.len() <= RAW_MAX));
        assert!(texts.cache.len() <= TEXT_CACHE);
    }
}
