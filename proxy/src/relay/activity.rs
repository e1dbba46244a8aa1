//! The relay's own bookkeeping of what a connection is doing, for the live
//! view: the command in flight and since when, and who the session is now.
//! A tap like the others, so it sees what they see; it needs no recording.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::time::Instant;

use super::RelayStats;
use crate::live::{Legs, LiveConnection};
use crate::protocol::constants::command;
use crate::protocol::{Direction, Identity, Observer, Summary};
use crate::record::{Tap, micros};
use crate::sync::locked;

/// Desyncs already logged, by reason and statement: one warning each, process-wide.
/// Bounded; desyncs are rare, so the lock is off every ordinary path.
fn logged() -> &'static Mutex<HashSet<(&'static str, String)>> {
    static LOGGED: OnceLock<Mutex<HashSet<(&'static str, String)>>> = OnceLock::new();
    LOGGED.get_or_init(Mutex::default)
}
const MAX_LOGGED: usize = 1000;

/// Writes a connection's entry in the live view, and counts and reports desyncs.
pub(super) struct Activity {
    live: Arc<LiveConnection>,
    stats: Arc<RelayStats>,
    /// Commands sent and not yet answered.
    unanswered: usize,
    /// When the current chunk arrived, µs.
    now_us: u64,
}

impl Activity {
    pub(super) fn new(live: Arc<LiveConnection>, stats: Arc<RelayStats>, accepted: Instant) -> Activity {
        Activity { live, stats, unanswered: 0, now_us: micros(accepted) }
    }

    /// Since when (µs since the recording epoch) a command has been waiting for its
    /// response, if one is.
    pub(super) fn busy_since_us(&self) -> Option<u64> {
        if self.unanswered == 0 {
            return None;
        }
        self.live.in_flight().map(|f| f.since_us)
    }

    /// The statement (or command) in flight, as logs name it.
    pub(super) fn statement_in_flight(&self) -> String {
        self.live.in_flight().map_or_else(
            || "none".to_owned(),
            |f| f.statement.map_or_else(|| command::name(f.command).to_owned(), |s| s.to_string()),
        )
    }

    /// How the legs are carried, for the live view.
    pub(super) fn set_legs(&self, legs: &Legs) {
        self.live.set_legs(legs.clone());
    }
}

impl Observer for Activity {
    fn command_started(&mut self, command: u8) {
        if self.unanswered == 0 {
            self.live.command_started(command, self.now_us);
        }
        self.unanswered += 1;
    }

    fn finished(&mut self, _summary: &Summary) {
        self.unanswered = self.unanswered.saturating_sub(1);
        if self.unanswered == 0 {
            self.live.idle();
        }
    }

    fn identity(&mut self, identity: &Identity) {
        self.live.set_identity(identity);
    }

    fn desync(&mut self, reason: &'static str) {
        self.stats.desynced(reason);
        // The statement in flight, when recording knows it, else the command.
        let what = self.live.in_flight().map(|f| match f.statement {
            Some(statement) => statement.to_string(),
            None => command::name(f.command).to_owned(),
        });
        let what = what.unwrap_or_else(|| "between commands".to_owned());
        let mut seen = locked(logged());
        if seen.len() < MAX_LOGGED && seen.insert((reason, what.clone())) {
            tracing::warn!(
                conn.id = self.live.id,
                reason,
                statement = %what,
                "lost track of the protocol; forwarding on unparsed and picking up at the next command (logged once per reason and statement)"
            );
        }
    }
}

impl Tap for Activity {
    fn arrived(&mut self, _direction: Direction, arrived_us: u64, _released_us: u64, _len: usize) {
        self.now_us = arrived_us;
    }
}
