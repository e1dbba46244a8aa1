//! SQL into a record: the fingerprint, its facts (kind, paging, hashed
//! values, trace id) and the normalised text, which a connection keeps at
//! hand so that a repeated statement costs a refcount, not an allocation.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::origin::Origins;
use super::statements::Statement;
use super::{CommandRecord, Values};
use crate::fingerprint::{FingerprintId, Fingerprinter, SqlMode, hash_value};

/// Normalised texts a connection keeps; cleared when full.
const TEXT_CACHE: usize = 512;
/// Longest literal example kept (`report.examples`).
const MAX_EXAMPLE: usize = 1024;

/// One connection's fingerprinter and its cache of normalised texts.
pub struct Texts {
    fingerprinter: Fingerprinter,
    cache: HashMap<FingerprintId, Arc<str>>,
    origins: Origins,
    /// Capture literal examples (`report.examples`).
    examples: bool,
}

impl Texts {
    pub fn new(examples: bool) -> Texts {
        Texts { fingerprinter: Fingerprinter::new(), cache: HashMap::default(), origins: Origins::default(), examples }
    }

    /// A pseudo-fingerprint for commands that carry no SQL (`COM_PING`).
    pub fn named(&mut self, name: &str) -> (FingerprintId, Arc<str>) {
        let id = FingerprintId(hash_value(name.as_bytes()));
        (id, cached(&mut self.cache, id, name).0)
    }

    /// Fingerprints `sql`, read as the server reads it under `mode`, into `record`; returns
    /// the statement's facts, for a prepare to remember.
    pub fn sql(&mut self, record: &mut CommandRecord, sql: &[u8], mode: SqlMode) -> Statement {
        let fp = self.fingerprinter.fingerprint_in(sql, mode);
        let trace = fp.trace.and_then(|t| u128::from_str_radix(t, 16).ok());
        let origin = fp.tags.and_then(|(from, to)| sql.get(from..to)).and_then(|c| self.origins.of(c));
        let mut values = Values::default();
        for &v in fp.values {
            values.push(v);
        }
        let (text, first_time) = cached(&mut self.cache, fp.id, fp.text);
        if first_time && self.examples {
            let sql = &sql[..sql.len().min(MAX_EXAMPLE)];
            record.example = Some(String::from_utf8_lossy(sql).into());
        }
        record.fingerprint = fp.id;
        record.text = text.clone();
        record.kind = fp.kind;
        record.paging = fp.paging;
        record.rows_in_values = fp.rows_in_values;
        record.trace = trace;
        record.origin = origin.clone();
        record.values = values;
        Statement {
            fingerprint: fp.id,
            text,
            kind: fp.kind,
            paging: fp.paging,
            limit_params: fp.limit_params,
            origin,
            params: 0,
            types: Vec::new(),
            columns: Vec::new(),
        }
    }
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
