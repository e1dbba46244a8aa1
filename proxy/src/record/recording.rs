//! Everything the collector records, under one lock: the rolling windows' slots and the
//! cumulative aggregates they settle into.
//!
//! Why one structure: a command used to be counted twice, once in the cumulative aggregates
//! and once again in its window slot (about 380 instructions of each command's 11,000 with
//! recording on, `scripts/bench.sh --only f`). Now it is counted in its slot alone, and the
//! slot is merged into the cumulative aggregates when the next one begins (at most once a
//! `report.window_resolution`). What the cumulative aggregates do not hold yet is the newest
//! slot; a reader gets the two merged ([`Recording::cumulative`]). The Prometheus metrics
//! stay per command in the cumulative aggregates: their histograms have buckets a slot's
//! distributions cannot be merged into exactly.
//!
//! With `report.window_max: 0` there are no slots, and the cumulative aggregates take every
//! event themselves, as before.

use std::borrow::Cow;

use super::{Aggregates, CommandMetrics, ConnectionStats, Event, Window, WindowError, Windows};

/// The cumulative recording and the rolling windows (see the module docs).
pub struct Recording {
    /// Everything recorded except the newest slot (with windows off, everything); the one
    /// that keeps the Prometheus metrics.
    settled: Aggregates,
    windows: Windows,
}

impl Recording {
    /// `settled` is the cumulative recording as it starts (metered, see [`Aggregates::new`]).
    pub fn new(settled: Aggregates, windows: Windows) -> Recording {
        Recording { settled, windows }
    }

    /// Counts one event: in its slot, and a command in the metrics too; with windows off, in
    /// the cumulative aggregates.
    pub fn apply(&mut self, event: &Event) {
        if self.windows.is_off() {
            self.settled.apply(event);
            return;
        }
        if let Event::Command(r) = event {
            self.settled.meter(r);
        }
        self.windows.apply(event, &mut self.settled);
    }

    /// Everything recorded since start or the last reset: the cumulative aggregates, with the
    /// newest slot merged in when there is one (a copy, then).
    pub fn cumulative(&self) -> Cow<'_, Aggregates> {
        match self.windows.newest() {
            Some(newest) => {
                let mut all = self.settled.clone();
                all.merge(newest);
                Cow::Owned(all)
            }
            None => Cow::Borrowed(&self.settled),
        }
    }

    /// A connection's totals since start or the last reset, as [`cumulative`](Self::cumulative)
    /// has them, without copying the rest.
    pub fn connection(&self, id: u64) -> Option<Cow<'_, ConnectionStats>> {
        match self.windows.newest() {
            Some(newest) => self.settled.merged_connection(newest, id).map(Cow::Owned),
            None => self.settled.connection(id).map(Cow::Borrowed),
        }
    }

    /// Statement classes listed in [`cumulative`](Self::cumulative), without merging.
    pub fn statement_classes(&self) -> usize {
        match self.windows.newest() {
            Some(newest) => self.settled.merged_len(newest),
            None => self.settled.queries().len(),
        }
    }

    /// The Prometheus metrics, since start (a reset leaves them alone).
    pub fn metrics(&mut self) -> &mut CommandMetrics {
        &mut self.settled.metrics
    }

    /// The last `window_us` up to `now_us` (see [`Windows::window`]).
    pub fn window(&self, now_us: u64, window_us: u64) -> Result<Window, WindowError> {
        self.windows.window(now_us, window_us)
    }

    /// Forgets everything recorded (`POST /reset`): open connections stay, with zeroed
    /// counters; the metrics stay as they are.
    pub fn reset(&mut self, now_us: u64) {
        self.windows.reset(now_us, &mut self.settled);
        self.settled.reset(now_us);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::fingerprint::{FingerprintId, StatementKind};
    use crate::protocol::constants::command::COM_QUERY;
    use crate::record::{CommandRecord, Connected};

    const S: u64 = 1_000_000;

    fn connected(conn_id: u64, at_us: u64) -> Event {
        Event::Connected(Box::new(Connected {
            conn_id,
            client: Arc::from("10.0.0.1:5000"),
            legs: Box::default(),
            user: Arc::from("app"),
            schema: None,
            at_us,
        }))
    }

    fn query(conn_id: u64, fingerprint: u64, at_us: u64, latency_us: u64) -> Event {
        let mut r = CommandRecord::new(
            conn_id,
            COM_QUERY,
            FingerprintId(fingerprint),
            Arc::from("select ?"),
            at_us - latency_us,
        );
        r.kind = StatementKind::Select;
        r.last_byte_us = at_us;
        r.round_trips = 1;
        r.rows = fingerprint;
        Event::Command(Box::new(r))
    }

    fn recording(window_max: Duration) -> Recording {
        let windows = Windows::new(Duration::from_secs(1), window_max, 10, 0, Arc::default());
        Recording::new(Aggregates::new(10, 0), windows)
    }

    /// What a reader sees of the recording: totals, statements, connections.
    fn read(a: &Aggregates) -> String {
        let queries: Vec<_> =
            a.queries().iter().map(|q| (q.fingerprint, q.count, q.rows_sum, q.latency.summary())).collect();
        let connections: Vec<_> =
            a.connections().map(|c| (c.id, c.commands, c.closed_us, c.rows, c.latency.summary())).collect();
        format!("{:?}\n{queries:?}\n{connections:?}", a.totals)
    }

    /// The events of a few connections over several slots: some open before a slot and idle
    /// in it, one closing mid-way, commands on the boundaries.
    fn events() -> Vec<Event> {
        let mut events = vec![connected(1, 0), connected(2, 10)];
        for second in 0..6 {
            for (conn, fingerprint) in [(1, 1 + second % 3), (2, 7)] {
                if conn == 2 && second > 3 {
                    continue;
                }
                events.push(query(conn, fingerprint, second * S + 500_000, 100 + 37 * second));
                events.push(query(conn, fingerprint, (second + 1) * S - 1, 2_000));
            }
            if second == 2 {
                events.push(connected(3, 2 * S + 7));
                events.push(query(3, 9, 2 * S + 9_000, 50));
            }
            if second == 4 {
                events.push(Event::Closed { conn_id: 2, at_us: 4 * S + 3 });
            }
        }
        events
    }

    /// With slots, each command counted once in its slot, the cumulative recording reads the
    /// same as aggregates that took every event themselves — at every moment, the newest slot
    /// merged in on reading.
    #[test]
    fn the_cumulative_recording_reads_the_same_as_one_that_took_every_event() {
        let (mut slotted, mut direct) = (recording(Duration::from_secs(60)), recording(Duration::ZERO));
        for event in events() {
            slotted.apply(&event);
            direct.apply(&event);
            assert_eq!(read(&slotted.cumulative()), read(&direct.cumulative()));
            for id in 1..=3 {
                let summary = |r: &Recording| r.connection(id).map(|c| (c.commands, c.rows, c.latency.summary()));
                assert_eq!(summary(&slotted), summary(&direct), "connection {id}");
            }
            assert_eq!(slotted.statement_classes(), direct.statement_classes());
        }
        assert!(slotted.windows.newest().is_some() && direct.windows.newest().is_none());
        let metrics = |r: &mut Recording| r.metrics().by_command().collect::<Vec<_>>();
        assert_eq!(metrics(&mut slotted), metrics(&mut direct), "metrics count each command once");
    }

    /// `/metrics` counts the statement classes without merging: the count must be what the
    /// merge lists, `other` included, whether statements fold in the slot, in the cumulative
    /// recording or in neither.
    #[test]
    fn statement_classes_are_counted_as_the_merge_lists_them() {
        let mut r = recording(Duration::from_secs(60));
        for i in 0..70u64 {
            // Three slots; 25 distinct statements in the first, 40 more across the others.
            let at = if i < 25 { S / 2 + i } else { S + i * 20_000 };
            r.apply(&query(1, 100 + i % 65, at, 10 + i));
            assert_eq!(r.statement_classes(), r.cumulative().queries().len(), "after {i}");
        }
    }

    /// A reset forgets what the newest slot held too, and keeps the connections opened in it.
    #[test]
    fn a_reset_keeps_connections_opened_in_the_newest_slot() {
        let mut r = recording(Duration::from_secs(60));
        for event in events() {
            r.apply(&event);
        }
        r.apply(&connected(4, 6 * S));
        r.reset(6 * S + 1);
        let after = r.cumulative();
        assert_eq!(after.totals.commands, 0);
        let open: Vec<_> = after.live_connections().iter().map(|c| (c.id, c.commands)).collect();
        assert_eq!(open, [(1, 0), (3, 0), (4, 0)]);
    }
}
