//! Pagination loops: the same statement with `LIMIT n OFFSET k` repeated with advancing
//! offsets, each page full. Every page is a round trip, and every OFFSET makes the server read
//! and discard the rows before it. The LIMIT comes from the SQL's literals or, for a prepared
//! `LIMIT ? OFFSET ?`, from the parameters bound to it.

use rustc_hash::FxHashMap as HashMap;

use rttscope_config::PaginationConfig;

use super::run::{Bar, Context, Detector, Run};
use super::{Detail, Kind, PatternScope};
use crate::fingerprint::FingerprintId;
use crate::record::CommandRecord;

const MAX_PAGE_RUNS: usize = 4096;

struct PageRun {
    run: Run,
    page_size: u64,
    next_offset: u64,
    /// A run only goes on after a full page, so all its pages but the last are full.
    last_full: bool,
    rescanned: u64,
}

pub struct Pages {
    min_pages: u64,
    runs: HashMap<(PatternScope, FingerprintId), PageRun>,
    last: Option<(PatternScope, FingerprintId)>,
}

impl Pages {
    pub fn new(config: &PaginationConfig) -> Pages {
        Pages { min_pages: u64::from(config.min_pages), runs: HashMap::default(), last: None }
    }
}

impl Detector for Pages {
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::PaginationLoop]
    }

    /// Inline, as most commands page nothing: those leave here, without the call into [`Pages::follow`].
    #[inline]
    fn command(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        self.last = None;
        if r.paging.is_none() {
            return;
        }
        self.follow(r, ctx, ended);
    }

    fn last_extended(&self) -> Option<&Run> {
        self.last.and_then(|k| self.runs.get(&k)).map(|p| &p.run)
    }

    fn connection_closed(&mut self, conn_id: u64, ended: &mut Vec<Run>) {
        let scope = PatternScope::Connection(conn_id);
        let keys: Vec<_> = self.runs.keys().filter(|(s, _)| *s == scope).copied().collect();
        ended.extend(keys.into_iter().filter_map(|k| self.runs.remove(&k)).map(|p| p.run));
        self.last = None;
    }

    fn in_progress(&self, out: &mut Vec<Run>) {
        out.extend(self.runs.values().map(|p| p.run.clone()));
    }

    fn bar(&self, _run: &Run) -> Option<Bar> {
        Some(Bar { min_executions: self.min_pages, min_projected_cost_us: 0 })
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.last = None;
    }
}

impl Pages {
    /// What [`Detector::command`] does with a command that may be this detector's.
    #[inline(never)]
    fn follow(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        let Some(limit) = r.paging else { return };
        if r.error.is_some() || limit.count == 0 {
            return;
        }
        let key = (ctx.scope, r.fingerprint);
        let continues = self
            .runs
            .get(&key)
            .is_some_and(|p| p.last_full && p.page_size == limit.count && p.next_offset == limit.offset);
        if !continues {
            ended.extend(self.runs.remove(&key).map(|p| p.run));
        }
        if !self.runs.contains_key(&key) && self.runs.len() >= MAX_PAGE_RUNS {
            return;
        }
        let p = self.runs.entry(key).or_insert_with(|| PageRun {
            run: Run::new(Kind::PaginationLoop, ctx, r, Detail::Pages { page_size: limit.count, rescanned: 0 }),
            page_size: limit.count,
            next_offset: limit.offset,
            last_full: true,
            rescanned: 0,
        });
        p.run.add(r, ctx);
        p.last_full = r.rows >= limit.count;
        p.next_offset = limit.offset.saturating_add(limit.count);
        p.rescanned = p.rescanned.saturating_add(limit.offset);
        p.run.detail = Detail::Pages { page_size: p.page_size, rescanned: p.rescanned };
        self.last = Some(key);
    }
}
