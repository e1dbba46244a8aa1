//! Chatty sessions: many tiny round trips on one connection that are not
//! already explained by a loop finding — pings before every use, SET after
//! SET, one small lookup after another. Each is cheap here and a full RTT
//! over a long link.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use rttscope_config::ChattyConfig;

use super::{min_known, Detail, Finding, Kind, Scope};
use crate::fingerprint::{FingerprintId, StatementKind};
use crate::record::CommandRecord;

/// Statements remembered per session for the evidence.
const TOP_TRACKED: usize = 64;
const TOP_SHOWN: usize = 5;

#[derive(Debug, Default)]
struct Session {
    tiny: u64,
    busy_us: u64,
    bytes: u64,
    by_statement: HashMap<FingerprintId, (Arc<str>, u64)>,
    rtt_us: u32,
}

pub struct Chatty {
    max_bytes: u64,
    min_round_trips: u64,
    min_cost_us: u64,
    reference_rtt_us: u64,
    sessions: HashMap<u64, Session>,
}

impl Chatty {
    pub fn new(c: &ChattyConfig, reference_rtt_us: u64) -> Chatty {
        Chatty {
            max_bytes: c.max_bytes.0,
            min_round_trips: u64::from(c.min_round_trips),
            min_cost_us: c.min_projected_cost.0.as_micros() as u64,
            reference_rtt_us,
            sessions: HashMap::default(),
        }
    }

    pub fn add(&mut self, r: &CommandRecord) {
        if r.round_trips == 0 || r.bytes_up > self.max_bytes || r.bytes_down > self.max_bytes {
            return;
        }
        let s = self.sessions.entry(r.conn_id).or_default();
        s.tiny += u64::from(r.round_trips);
        s.busy_us += r.latency_us();
        s.bytes += r.bytes_up + r.bytes_down;
        s.rtt_us = min_known(s.rtt_us, r.rtt_us);
        if let Some((_, n)) = s.by_statement.get_mut(&r.fingerprint) {
            *n += u64::from(r.round_trips);
        } else if s.by_statement.len() < TOP_TRACKED {
            s.by_statement.insert(r.fingerprint, (r.text.clone(), u64::from(r.round_trips)));
        }
    }

    fn finding(&self, conn: u64, s: &Session, explained: u64) -> Option<Finding> {
        let remaining = s.tiny.saturating_sub(explained);
        if remaining < self.min_round_trips || remaining.saturating_mul(self.reference_rtt_us) < self.min_cost_us {
            return None;
        }
        let mut top: Vec<(FingerprintId, Arc<str>, u64)> = s.by_statement.iter().map(|(id, (t, n))| (*id, t.clone(), *n)).collect();
        top.sort_by_key(|t| std::cmp::Reverse(t.2));
        let first = top.first().map(|(id, t, _)| (*id, t.clone()))?;
        // Time and bytes in proportion to the round trips not explained elsewhere.
        let share = |v: u64| (v as u128 * u128::from(remaining) / u128::from(s.tiny.max(1))) as u64;
        Some(Finding {
            kind: Kind::ChattySession,
            fingerprint: first.0,
            text: first.1,
            statement_kind: StatementKind::Other,
            parent: None,
            scope: Scope::Connection(conn),
            occurrences: 1,
            executions: remaining,
            round_trips: remaining,
            time_us: share(s.busy_us),
            busy_us: share(s.busy_us),
            bytes: share(s.bytes),
            rows: 0,
            detail: Detail::Chatty { tiny: remaining, top: top.into_iter().take(TOP_SHOWN).map(|(_, t, n)| (t, n)).collect() },
            per_conn: vec![(conn, remaining)],
            rtt_us: s.rtt_us,
        })
    }

    /// The connection closed: its session's finding, if it was chatty.
    pub fn close(&mut self, conn: u64, explained: &u64) -> Option<Finding> {
        let s = self.sessions.remove(&conn)?;
        self.finding(conn, &s, *explained)
    }

    /// Findings of sessions still open.
    pub fn open(&self, explained: &dyn Fn(u64) -> u64) -> Vec<Finding> {
        self.sessions.iter().filter_map(|(&conn, s)| self.finding(conn, s, explained(conn))).collect()
    }

    pub fn clear(&mut self) {
        self.sessions.clear();
    }
}
