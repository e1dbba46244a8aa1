//! Undersized fetch batches: a server-side cursor read a few rows per `COM_STMT_FETCH`, one
//! round trip each. A run is one cursor, from its execute to its last (short) batch, its
//! close or reset, or the next execute of its statement.

use rustc_hash::FxHashMap as HashMap;

use rttscope_config::FetchConfig;

use super::run::{Bar, Context, Detector, Run};
use super::{Detail, Kind, PatternScope};
use crate::protocol::constants::command::*;
use crate::record::CommandRecord;

/// Cursors tracked at once (per connection and statement).
const MAX_CURSORS: usize = 4096;

pub struct Cursors {
    min_rows: u64,
    min_fetches: u64,
    open: HashMap<(u64, u32), Run>,
    last: Option<(u64, u32)>,
}

impl Cursors {
    pub fn new(config: &FetchConfig) -> Cursors {
        Cursors {
            min_rows: config.min_rows,
            min_fetches: u64::from(config.min_fetches),
            open: HashMap::default(),
            last: None,
        }
    }
}

impl Detector for Cursors {
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::UndersizedFetch]
    }

    /// Inline, as most commands name no prepared statement: those leave here, without the call into [`Cursors::follow`].
    #[inline]
    fn command(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        self.last = None;
        if r.statement.is_none() {
            return;
        }
        self.follow(r, ctx, ended);
    }

    fn last_extended(&self) -> Option<&Run> {
        self.last.and_then(|k| self.open.get(&k))
    }

    fn connection_closed(&mut self, conn_id: u64, ended: &mut Vec<Run>) {
        let keys: Vec<_> = self.open.keys().filter(|(c, _)| *c == conn_id).copied().collect();
        ended.extend(keys.into_iter().filter_map(|k| self.open.remove(&k)));
        self.last = None;
    }

    fn in_progress(&self, out: &mut Vec<Run>) {
        out.extend(self.open.values().cloned());
    }

    fn bar(&self, run: &Run) -> Option<Bar> {
        let Detail::Fetch { fetch_size } = run.detail else { return None };
        (u64::from(fetch_size) < self.min_rows)
            .then_some(Bar { min_executions: self.min_fetches, min_projected_cost_us: 0 })
    }

    fn clear(&mut self) {
        self.open.clear();
        self.last = None;
    }
}

impl Cursors {
    /// What [`Detector::command`] does with a command that may be this detector's.
    #[inline(never)]
    fn follow(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        let Some(statement) = r.statement else { return };
        let key = (r.conn_id, statement);
        match r.command {
            COM_STMT_EXECUTE => {
                ended.extend(self.open.remove(&key));
                if r.cursor && r.error.is_none() && r.columns > 0 && self.open.len() < MAX_CURSORS {
                    // Cursors are the connection's, even when the execute carried a trace.
                    let ctx = Context { scope: PatternScope::Connection(r.conn_id), ..ctx.clone() };
                    let run = Run::new(Kind::UndersizedFetch, &ctx, r, Detail::Fetch { fetch_size: 0 });
                    self.open.insert(key, run);
                }
            }
            COM_STMT_FETCH => {
                let Some(run) = self.open.get_mut(&key) else { return };
                run.detail = Detail::Fetch { fetch_size: r.fetch_rows };
                run.add(r, ctx);
                // A short batch is the last one.
                if r.rows < u64::from(r.fetch_rows) || r.error.is_some() {
                    ended.extend(self.open.remove(&key));
                } else {
                    self.last = Some(key);
                }
            }
            COM_STMT_CLOSE | COM_STMT_RESET => ended.extend(self.open.remove(&key)),
            _ => {}
        }
    }
}
