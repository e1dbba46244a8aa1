//! Aggregates added together: the slots of a rolling window merged into one, oldest
//! first, so a window's report is built exactly as the cumulative one is.

use super::{Aggregates, CLOSED_KEPT, ConnectionStats, Totals};

impl Aggregates {
    /// Adds `later` (what was recorded after everything in `self`) to `self`. Statement
    /// classes and connections are matched by id; distributions merge, so percentiles and
    /// maxima are those of the union. The fold bound holds as it does for commands.
    pub fn merge(&mut self, later: &Aggregates) {
        add_totals(&mut self.totals, &later.totals);
        self.busy.absorb(&later.busy);
        self.lateness.merge(&later.lateness);
        for q in later.queries.values() {
            match self.queries.get_mut(&q.fingerprint) {
                Some(mine) => {
                    mine.absorb(q);
                    if mine.example.is_none() {
                        mine.example.clone_from(&q.example);
                    }
                }
                None => {
                    self.queries.insert(q.fingerprint, q.clone());
                }
            }
        }
        if later.other.folded > 0 {
            self.other.absorb(&later.other);
            self.other.folded += later.other.folded;
        }
        if self.queries.len() >= 2 * self.max_fingerprints {
            self.fold();
        }
        for c in later.connections.values() {
            match self.connections.get_mut(&c.id) {
                Some(mine) => add_connection(mine, c),
                None => {
                    self.connections.insert(c.id, c.clone());
                }
            }
        }
        for c in &later.closed {
            let closed = match self.connections.remove(&c.id) {
                Some(mine) => {
                    let mut mine = *mine;
                    add_connection(&mut mine, c);
                    mine.closed_us = c.closed_us;
                    mine
                }
                None => c.clone(),
            };
            if self.closed.len() >= CLOSED_KEPT {
                self.closed.pop_front();
            }
            self.closed.push_back(closed);
        }
        if later.rtt_us > 0 {
            self.rtt_us = later.rtt_us;
        }
    }

    /// How many statement classes [`queries`](Self::queries) would list after
    /// [`merge`](Self::merge)ing `later` (`other` among them once anything folded into it),
    /// without merging.
    pub fn merged_len(&self, later: &Aggregates) -> usize {
        let added = later.queries.keys().filter(|id| !self.queries.contains_key(id)).count();
        let all = self.queries.len() + added;
        let folds = all >= 2 * self.max_fingerprints;
        let listed = if folds { self.max_fingerprints } else { all };
        listed + usize::from(folds || self.other.folded > 0 || later.other.folded > 0)
    }

    /// An open connection's totals with `later`'s added, as [`merge`](Self::merge) would leave
    /// them: what [`connection`](Self::connection) of the merge would give, without merging.
    pub fn merged_connection(&self, later: &Aggregates, id: u64) -> Option<ConnectionStats> {
        if later.closed.iter().any(|c| c.id == id) {
            return None;
        }
        match (self.connection(id), later.connection(id)) {
            (Some(mine), Some(theirs)) => {
                let mut merged = mine.clone();
                add_connection(&mut merged, theirs);
                Some(merged)
            }
            (mine, theirs) => mine.or(theirs).cloned(),
        }
    }

    /// Takes `c` as an open connection unless it is already known: a window slot learns of
    /// connections opened before it began this way, when they first act in it.
    pub fn adopt_connection(&mut self, c: &ConnectionStats) {
        self.connections.get_or_insert_with(c.id, || Box::new(c.clone()));
    }
}

fn add_totals(t: &mut Totals, later: &Totals) {
    t.commands += later.commands;
    t.executions += later.executions;
    t.errors += later.errors;
    t.round_trips += later.round_trips;
    t.time_us += later.time_us;
    t.bytes_up += later.bytes_up;
    t.bytes_down += later.bytes_down;
    t.rows += later.rows;
    t.connections += later.connections;
    t.events_dropped += later.events_dropped;
    t.injected_us += later.injected_us;
    t.wire_up += later.wire_up;
    t.wire_down += later.wire_down;
    t.unparsed += later.unparsed;
    t.inject_late_us += later.inject_late_us;
    t.large_responses.add(later.large_responses);
}

/// Adds `later`'s counters to `mine`; identity and the last RTT are `later`'s.
fn add_connection(mine: &mut ConnectionStats, later: &ConnectionStats) {
    mine.commands += later.commands;
    mine.errors += later.errors;
    mine.round_trips += later.round_trips;
    mine.latency.merge(&later.latency);
    mine.bytes_up += later.bytes_up;
    mine.bytes_down += later.bytes_down;
    mine.wire_up += later.wire_up;
    mine.wire_down += later.wire_down;
    mine.rows += later.rows;
    mine.injected_us += later.injected_us;
    mine.large_responses.add(later.large_responses);
    mine.user.clone_from(&later.user);
    mine.schema.clone_from(&later.schema);
    if later.rtt_us > 0 {
        mine.rtt_us = later.rtt_us;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fingerprint::{FingerprintId, StatementKind};
    use crate::protocol::constants::command::COM_QUERY;
    use crate::record::{CommandRecord, Connected, Event};

    fn query(conn: u64, fingerprint: u64, latency_us: u64) -> Event {
        let mut r = CommandRecord::new(conn, COM_QUERY, FingerprintId(fingerprint), Arc::from("select ?"), 1000);
        r.kind = StatementKind::Select;
        r.last_byte_us = 1000 + latency_us;
        r.round_trips = 1;
        Event::Command(Box::new(r))
    }

    /// Merging per-slot aggregates gives what one aggregate of every event gives.
    #[test]
    fn merged_slots_equal_one_aggregate_of_everything() {
        let (mut whole, mut first, mut second) =
            (Aggregates::new(10, 0), Aggregates::new(10, 0), Aggregates::new(10, 5));
        let connected = Event::Connected(Box::new(Connected {
            conn_id: 1,
            client: Arc::from("c"),
            legs: Box::default(),
            user: Arc::from("u"),
            schema: None,
            at_us: 0,
        }));
        whole.apply(&connected);
        first.apply(&connected);
        for (i, e) in [query(1, 7, 100), query(1, 8, 300), query(1, 7, 5_000)].iter().enumerate() {
            whole.apply(e);
            if i == 0 {
                first.apply(e)
            } else {
                if let Some(c) = first.connection(1) {
                    second.adopt_connection(&c.clone().zeroed());
                }
                second.apply(e);
            }
        }
        let closed = Event::Closed { conn_id: 1, at_us: 9 };
        whole.apply(&closed);
        second.apply(&closed);
        first.merge(&second);
        assert_eq!(first.totals, whole.totals);
        for id in [7, 8] {
            let (a, b) = (first.query(FingerprintId(id)).unwrap(), whole.query(FingerprintId(id)).unwrap());
            assert_eq!((a.count, a.latency.summary()), (b.count, b.latency.summary()), "{id}");
        }
        let c: Vec<_> = first.connections().map(|c| (c.id, c.commands, c.closed_us, c.latency.summary())).collect();
        let w: Vec<_> = whole.connections().map(|c| (c.id, c.commands, c.closed_us, c.latency.summary())).collect();
        assert_eq!(c, w);
    }
}
