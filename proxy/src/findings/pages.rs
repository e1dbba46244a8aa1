//! Pagination loops: the same statement with `LIMIT n OFFSET k` repeated
//! with advancing offsets, each page full. Every page is a round trip, and
//! every OFFSET makes the server read and discard the rows before it.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::{min_known, Detail, Finding, Kind, Scope};
use crate::fingerprint::{FingerprintId, StatementKind};
use crate::record::CommandRecord;

const MAX_PAGE_RUNS: usize = 4096;

#[derive(Clone, Debug)]
pub struct PageRun {
    scope: Scope,
    conn: u64,
    fingerprint: FingerprintId,
    text: Arc<str>,
    kind: StatementKind,
    pub page_size: u64,
    next_offset: u64,
    last_full: bool,
    pub pages: u64,
    pub full_pages: u64,
    /// Rows the server skipped over for OFFSETs: the sum of the offsets.
    pub rescanned: u64,
    rows: u64,
    round_trips: u64,
    time_us: u64,
    bytes: u64,
    first_us: u64,
    last_us: u64,
    rtt_us: u32,
}

impl PageRun {
    pub fn to_finding(&self) -> Finding {
        Finding {
            kind: Kind::PaginationLoop,
            fingerprint: self.fingerprint,
            text: self.text.clone(),
            statement_kind: self.kind,
            parent: None,
            scope: self.scope,
            occurrences: 1,
            executions: self.pages,
            round_trips: self.round_trips,
            time_us: self.last_us.saturating_sub(self.first_us),
            busy_us: self.time_us,
            bytes: self.bytes,
            rows: self.rows,
            detail: Detail::Pages { page_size: self.page_size, rescanned: self.rescanned },
            per_conn: vec![(self.conn, self.round_trips)],
            rtt_us: self.rtt_us,
        }
    }
}

#[derive(Default)]
pub struct Pages {
    runs: HashMap<(Scope, FingerprintId), PageRun>,
}

impl Pages {
    /// Follows paged queries; returns a run that just ended.
    pub fn add(&mut self, scope: Scope, r: &CommandRecord) -> Option<PageRun> {
        let limit = r.limit?;
        if r.error.is_some() || limit.count == 0 {
            return None;
        }
        let key = (scope, r.fingerprint);
        let continues = self.runs.get(&key).is_some_and(|run| run.last_full && run.page_size == limit.count && run.next_offset == limit.offset);
        let ended = if continues { None } else { self.runs.remove(&key) };
        if !self.runs.contains_key(&key) && self.runs.len() >= MAX_PAGE_RUNS {
            return ended;
        }
        let run = self.runs.entry(key).or_insert_with(|| PageRun {
            scope,
            conn: r.conn_id,
            fingerprint: r.fingerprint,
            text: r.text.clone(),
            kind: r.kind,
            page_size: limit.count,
            next_offset: limit.offset,
            last_full: true,
            pages: 0,
            full_pages: 0,
            rescanned: 0,
            rows: 0,
            round_trips: 0,
            time_us: 0,
            bytes: 0,
            first_us: r.request_us,
            last_us: r.last_byte_us,
            rtt_us: 0,
        });
        run.pages += 1;
        run.last_full = r.rows >= limit.count;
        run.full_pages += u64::from(run.last_full);
        run.next_offset = limit.offset.saturating_add(limit.count);
        run.rescanned = run.rescanned.saturating_add(limit.offset);
        run.rows += r.rows;
        run.round_trips += u64::from(r.round_trips);
        run.time_us += r.latency_us();
        run.bytes += r.bytes_up + r.bytes_down;
        run.last_us = r.last_byte_us;
        run.rtt_us = min_known(run.rtt_us, r.rtt_us);
        ended
    }

    pub fn close_scope(&mut self, scope: Scope) -> Vec<PageRun> {
        let keys: Vec<_> = self.runs.keys().filter(|(s, _)| *s == scope).copied().collect();
        keys.into_iter().filter_map(|k| self.runs.remove(&k)).collect()
    }

    pub fn open(&self) -> impl Iterator<Item = &PageRun> {
        self.runs.values()
    }

    pub fn clear(&mut self) {
        self.runs.clear();
    }
}
