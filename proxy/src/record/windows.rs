//! The rolling windows behind `GET /report?window=`: what was recorded, kept in slots of
//! `report.window_resolution` for `report.window_max`, so the last N minutes can be
//! reported apart from the cumulative recording.
//!
//! Each slot is an [`Aggregates`] of the events whose time falls in it (a command's by its
//! last response byte); a window is its slots merged. The cumulative recording is made the
//! same way: a slot that stops taking events (the next one began) is merged into it, so each
//! command is counted once, in its slot, rather than once there and once again in the
//! cumulative aggregates ([`Recording`](super::Recording) holds both). A slot holds only the statements and
//! connections that were active in it, each bounded as the cumulative aggregates are
//! (`record.max_fingerprints`), and there are at most `window_max / window_resolution + 1`
//! slots: the memory bound. An idle period costs nothing: slots are made by events.
//! Findings are not here: the findings engine keeps its own occurrences with their times
//! (`FindingsEngine::report_since`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap as HashMap;

use super::{Aggregates, ConnectionStats, Event};

/// Why a window cannot be reported.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WindowError {
    /// `report.window_max` is 0: no slots are kept, so no window can be answered.
    #[error("rolling windows are off (report.window_max: 0)")]
    Off,
    /// The asked window is shorter than one slot; both durations as the user wrote them.
    #[error("a window must be at least report.window_resolution ({resolution}), not {asked}")]
    TooShort {
        /// The window asked for, as the user wrote it.
        asked: String,
        /// `report.window_resolution`, human-readable.
        resolution: String,
    },
    /// The asked window reaches past the oldest slot kept; both durations as the user wrote them.
    #[error("a window can be at most report.window_max ({max}), not {asked}")]
    TooLong {
        /// The window asked for, as the user wrote it.
        asked: String,
        /// `report.window_max`, human-readable.
        max: String,
    },
}

struct Slot {
    start_us: u64,
    aggregates: Aggregates,
    /// The dropped-events counter when the slot began: a window's drops are the difference.
    dropped_before: u64,
}

/// Slots of recent [`Aggregates`], oldest first, bounded by `window_max / window_resolution + 1`.
pub struct Windows {
    resolution_us: u64,
    /// 0: off.
    max_us: u64,
    max_fingerprints: usize,
    /// Oldest first.
    slots: VecDeque<Slot>,
    /// Open connections as they logged in (nothing recorded): a slot adopts one when it
    /// first acts there, so a slot lists only the connections active in it.
    open: HashMap<u64, ConnectionStats>,
    /// The start of the recording (or the last reset): no window reaches before it.
    since_us: u64,
    dropped: Arc<AtomicU64>,
}

/// A window merged from its slots.
pub struct Window {
    /// The recording of the window; its `since_us` is where the window starts.
    pub aggregates: Aggregates,
    /// Events dropped during the window (approximate to a slot).
    pub events_dropped: u64,
    /// The slot length, µs: the window's start is exact only to this.
    pub resolution_us: u64,
}

impl Windows {
    /// Slots of `resolution` (at least 1 µs) kept for `max` (zero turns windows off); `dropped` is the event sink's drop counter.
    pub fn new(
        resolution: std::time::Duration,
        max: std::time::Duration,
        max_fingerprints: usize,
        since_us: u64,
        dropped: Arc<AtomicU64>,
    ) -> Windows {
        Windows {
            resolution_us: (resolution.as_micros() as u64).max(1),
            max_us: max.as_micros() as u64,
            max_fingerprints,
            slots: VecDeque::new(),
            open: HashMap::default(),
            since_us,
            dropped,
        }
    }

    /// Whether `report.window_max` is 0: no slots, and the cumulative recording takes every
    /// event itself.
    pub fn is_off(&self) -> bool {
        self.max_us == 0
    }

    /// The slot taking events now: what the cumulative recording does not hold yet.
    pub fn newest(&self) -> Option<&Aggregates> {
        self.slots.back().map(|s| &s.aggregates)
    }

    /// Forgets every slot (`POST /reset`); open connections stay known. The newest slot is
    /// merged into `settled` first, so connections opened in it stay listed there.
    pub fn reset(&mut self, now_us: u64, settled: &mut Aggregates) {
        if let Some(newest) = self.newest() {
            settled.merge(newest);
        }
        self.slots.clear();
        self.since_us = now_us;
    }

    /// Counts one event in the slot its time falls in (a command's last byte). When that
    /// begins a new slot, the one before is merged into `settled`, the cumulative recording:
    /// it takes no events any more. A no-op when windows are off.
    pub fn apply(&mut self, event: &Event, settled: &mut Aggregates) {
        if self.max_us == 0 {
            return;
        }
        // The common case first: a command, in the slot of its last byte, in one look-up of
        // its connection.
        if let Event::Command(r) = event {
            self.make_slot_for(r.last_byte_us, settled);
            if let Some(slot) = self.slots.back_mut() {
                slot.aggregates.apply_command(r, &self.open);
            }
            return;
        }
        let at = match event {
            Event::Connected(c) => Some(c.at_us),
            Event::Closed { conn_id: _, at_us } => Some(*at_us),
            Event::Command(r) => Some(r.last_byte_us),
            Event::Identity(_) => None,
        };
        let conn_id = match event {
            Event::Connected(c) => c.conn_id,
            Event::Identity(change) => change.conn_id,
            Event::Closed { conn_id, .. } => *conn_id,
            Event::Command(r) => r.conn_id,
        };
        if let Event::Identity(change) = event
            && let Some(c) = self.open.get_mut(&conn_id)
        {
            c.user.clone_from(&change.user);
            c.schema.clone_from(&change.schema);
        }
        if let Some(at) = at {
            self.make_slot_for(at, settled);
        }
        // Disjoint fields: the newest slot, and the connection directory.
        let Some(slot) = self.slots.back_mut().map(|s| &mut s.aggregates) else { return };
        if let Some(template) = self.open.get(&conn_id) {
            slot.adopt_connection(template);
        }
        slot.apply(event);
        match event {
            Event::Connected(_) => {
                if let Some(c) = slot.connection(conn_id) {
                    self.open.insert(conn_id, c.clone());
                }
            }
            Event::Closed { .. } => {
                self.open.remove(&conn_id);
            }
            _ => {}
        }
    }

    /// Makes the slot for an event at `at_us` the newest, unless it already is or the
    /// event is late (events of different connections arrive a little out of order; a
    /// late one goes to the newest slot). The slot it replaces as the newest is merged into
    /// `settled`.
    #[inline(always)]
    fn make_slot_for(&mut self, at_us: u64, settled: &mut Aggregates) {
        // Before the newest slot's end, the slot `at_us` falls in starts no later than it
        // (slots start at multiples of the resolution): without dividing, for most events.
        let in_newest = |s: &Slot| at_us.checked_sub(s.start_us).is_none_or(|since| since < self.resolution_us);
        if self.slots.back().is_some_and(in_newest) {
            return;
        }
        self.new_slot(at_us - at_us % self.resolution_us, settled);
    }

    /// Begins the slot starting at `start` ([`Windows::make_slot_for`]).
    #[inline(never)]
    fn new_slot(&mut self, start: u64, settled: &mut Aggregates) {
        // Slots that no window can reach any more go first.
        let oldest = start.saturating_sub(self.max_us);
        while self.slots.front().is_some_and(|s| s.start_us + self.resolution_us <= oldest) {
            self.slots.pop_front();
        }
        // The newest slot takes every event (a late one too), so the one before it is only
        // read from now on: packed, it holds a few bytes per distinct latency of each
        // connection rather than a histogram of kilobytes.
        if let Some(previous) = self.slots.back_mut() {
            settled.merge(&previous.aggregates);
            previous.aggregates.pack();
        }
        // Prometheus reads the cumulative aggregates' metrics; a slot needs none.
        let aggregates = Aggregates::unmetered(self.max_fingerprints, start);
        let dropped_before = self.dropped.load(Ordering::Relaxed);
        self.slots.push_back(Slot { start_us: start, aggregates, dropped_before });
    }

    /// The last `window_us` up to `now_us`, in whole slots: it starts at the beginning of
    /// the slot `now - window` falls in (or at the start of the recording, if later).
    pub fn window(&self, now_us: u64, window_us: u64) -> Result<Window, WindowError> {
        let show = |us: u64| rttscope_config::HumanDuration::from(std::time::Duration::from_micros(us)).to_string();
        if self.max_us == 0 {
            return Err(WindowError::Off);
        }
        if window_us < self.resolution_us {
            return Err(WindowError::TooShort { asked: show(window_us), resolution: show(self.resolution_us) });
        }
        if window_us > self.max_us {
            return Err(WindowError::TooLong { asked: show(window_us), max: show(self.max_us) });
        }
        let from = now_us.saturating_sub(window_us);
        let start = (from - from % self.resolution_us).max(self.since_us);
        let mut aggregates = Aggregates::unmetered(self.max_fingerprints, start);
        let mut dropped_before = None;
        for slot in self.slots.iter().filter(|s| s.start_us + self.resolution_us > start) {
            dropped_before.get_or_insert(slot.dropped_before);
            aggregates.merge(&slot.aggregates);
        }
        let dropped_now = self.dropped.load(Ordering::Relaxed);
        let events_dropped = dropped_now.saturating_sub(dropped_before.unwrap_or(dropped_now));
        Ok(Window { aggregates, events_dropped, resolution_us: self.resolution_us })
    }

    /// Slots held now (for tests of the bound).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fingerprint::{FingerprintId, StatementKind};
    use crate::protocol::constants::command::COM_QUERY;
    use crate::record::CommandRecord;
    use crate::record::Connected;

    const S: u64 = 1_000_000;

    fn query(fingerprint: u64, at_us: u64) -> Event {
        let mut r = CommandRecord::new(
            1,
            COM_QUERY,
            FingerprintId(fingerprint),
            Arc::from("select ?"),
            at_us.saturating_sub(100),
        );
        r.kind = StatementKind::Select;
        r.last_byte_us = at_us;
        r.round_trips = 1;
        Event::Command(Box::new(r))
    }

    fn windows(max_secs: u64) -> Windows {
        Windows::new(Duration::from_secs(1), Duration::from_secs(max_secs), 10, 0, Arc::default())
    }

    fn count(w: &Windows, now_us: u64, window_us: u64, fingerprint: u64) -> u64 {
        let window = w.window(now_us, window_us).unwrap();
        window.aggregates.query(FingerprintId(fingerprint)).map_or(0, |q| q.count)
    }

    #[test]
    fn a_window_counts_only_its_own_slots() {
        let (mut w, mut settled) = (windows(60), Aggregates::new(10, 0));
        for at in [10 * S, 10 * S + 5, 11 * S] {
            w.apply(&query(1, at), &mut settled);
        }
        w.apply(&query(2, 20 * S + 500), &mut settled);
        assert_eq!(count(&w, 21 * S, 5 * S, 1), 0, "statement 1 ran 10 s before");
        assert_eq!(count(&w, 21 * S, 5 * S, 2), 1);
        assert_eq!(count(&w, 21 * S, 11 * S, 1), 3, "a longer window reaches back to it");
        // The window starts at its first slot's beginning.
        assert_eq!(w.window(21 * S + 300, 5 * S).unwrap().aggregates.since_us, 16 * S);
    }

    #[test]
    fn slots_are_bounded_by_window_max() {
        let (mut w, mut settled) = (windows(5), Aggregates::new(10, 0));
        for second in 0..100 {
            w.apply(&query(1, second * S), &mut settled);
            assert!(w.slots() <= 6, "{} slots at {second}", w.slots());
        }
        assert_eq!(count(&w, 99 * S, 5 * S, 1), 6, "slots 94..=99");
    }

    /// The soak's shape: many connections, each running a command every second or so with
    /// latencies spread over milliseconds. A past slot holds every connection active in it;
    /// each connection's latency histogram must cost bytes per distinct value, not the
    /// kilobytes of a histogram reaching milliseconds (~10 MiB a slot for 1,000 connections
    /// before slots were packed) — and the window must read the same.
    #[test]
    fn past_slots_hold_packed_histograms_and_windows_read_the_same() {
        const CONNECTIONS: u64 = 1000;
        let (mut w, mut settled) = (windows(60), Aggregates::new(10, 0));
        let mut whole = Aggregates::new(10, 0);
        let mut state = 1u64;
        for conn_id in 1..=CONNECTIONS {
            let connected = Event::Connected(Box::new(Connected {
                conn_id,
                client: Arc::from("10.0.0.1:5000"),
                legs: Box::default(),
                user: Arc::from("app"),
                schema: None,
                at_us: 0,
            }));
            w.apply(&connected, &mut settled);
            whole.apply(&connected);
        }
        for second in 0..10 {
            for conn_id in 1..=CONNECTIONS {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let latency = 100 + (state >> 33) % 200_000;
                let at = second * S + conn_id * 500 + latency;
                let Event::Command(mut r) = query(conn_id % 3, at) else { unreachable!() };
                (r.conn_id, r.request_us) = (conn_id, at - latency);
                let e = Event::Command(r);
                w.apply(&e, &mut settled);
                whole.apply(&e);
            }
        }
        assert_eq!(w.slots(), 10);
        let past = &w.slots.as_slices().0[..9];
        let bytes: usize =
            past.iter().flat_map(|s| s.aggregates.connections().map(|c| c.latency.heap_bytes())).sum::<usize>();
        let per_connection = bytes / (9 * CONNECTIONS as usize);
        assert!(per_connection <= 64, "{per_connection} histogram bytes per connection and slot");
        let window = w.window(10 * S, 60 * S).unwrap().aggregates;
        let read = |a: &Aggregates| {
            a.connections()
                .map(|c| (c.id, c.commands, c.latency.summary(), c.latency.distribution()))
                .collect::<Vec<_>>()
        };
        assert_eq!(read(&window), read(&whole));
        for id in 0..3 {
            let (a, b) = (window.query(FingerprintId(id)).unwrap(), whole.query(FingerprintId(id)).unwrap());
            assert_eq!((a.count, a.latency.summary()), (b.count, b.latency.summary()));
        }
    }

    #[test]
    fn reset_forgets_the_slots_and_no_window_reaches_before_it() {
        let (mut w, mut settled) = (windows(60), Aggregates::new(10, 0));
        w.apply(&query(1, 10 * S), &mut settled);
        w.reset(10 * S + 500_000, &mut settled);
        assert_eq!(w.slots(), 0);
        w.apply(&query(2, 11 * S), &mut settled);
        let window = w.window(12 * S, 30 * S).unwrap();
        assert_eq!(window.aggregates.since_us, 10 * S + 500_000, "the window starts at the reset");
        assert_eq!((count(&w, 12 * S, 30 * S, 1), count(&w, 12 * S, 30 * S, 2)), (0, 1));
    }

    #[test]
    fn bad_windows_say_why() {
        let w = windows(60);
        assert_eq!(
            w.window(0, 500_000).err().map(|e| e.to_string()).as_deref(),
            Some("a window must be at least report.window_resolution (1s), not 500ms")
        );
        assert!(matches!(w.window(0, 61 * S), Err(WindowError::TooLong { .. })));
        let off = Windows::new(Duration::from_secs(1), Duration::ZERO, 10, 0, Arc::default());
        assert_eq!(off.window(0, S).err(), Some(WindowError::Off));
    }
}
