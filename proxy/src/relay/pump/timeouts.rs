//! The idle and query timeouts of one connection: one timer for both, checked only when it
//! fires.

use std::time::Duration;

use tokio::time::Instant;

use super::{Ended, PumpSettings};
use crate::record::micros;

/// The idle and query timeouts, checked only when their timer fires.
pub(super) struct Timeouts {
    idle: Option<Duration>,
    query: Option<Duration>,
}

/// A timer that never fires in practice.
const NEVER: Duration = Duration::from_secs(86400 * 365);

impl Timeouts {
    pub(super) fn new(settings: &PumpSettings) -> Timeouts {
        Timeouts { idle: settings.idle_timeout, query: settings.query_timeout }
    }

    /// When to look first.
    pub(super) fn first(&self, now: Instant) -> Instant {
        now + self.idle.unwrap_or(NEVER).min(self.query.unwrap_or(NEVER))
    }

    /// At `now`, with the last read at `last_activity_us`, the last write of bytes that had
    /// waited at `late_write` and a command in flight since `busy_since_us` (if any): how
    /// the connection ends, or when to look again. Activity is timed when it happens, not
    /// when the timer next looks, so an idle connection closes one timeout after its last
    /// byte, not up to two.
    pub(super) fn check(
        &mut self,
        now: Instant,
        last_activity_us: &mut u64,
        late_write: Option<Instant>,
        busy_since_us: Option<u64>,
    ) -> Result<Instant, Ended> {
        let now_us = micros(now);
        if let Some(written) = late_write {
            *last_activity_us = (*last_activity_us).max(micros(written));
        }
        let mut next = now + NEVER;
        if let Some(since) = busy_since_us {
            // A command in flight is never idle.
            *last_activity_us = now_us;
            if let Some(query) = self.query {
                let waited = Duration::from_micros(now_us.saturating_sub(since));
                if waited >= query {
                    return Err(Ended::QueryTimeout);
                }
                next = next.min(now + (query - waited));
            }
        } else if let Some(query) = self.query {
            // A command may start any moment: look again within one timeout.
            next = next.min(now + query);
        }
        if let Some(idle) = self.idle {
            let deadline_us = last_activity_us.saturating_add(u64::try_from(idle.as_micros()).unwrap_or(u64::MAX));
            if busy_since_us.is_none() && now_us >= deadline_us {
                return Err(Ended::IdleTimeout);
            }
            next =
                next.min(now + Duration::from_micros(deadline_us.saturating_sub(now_us)).max(Duration::from_millis(1)));
        }
        Ok(next)
    }
}
