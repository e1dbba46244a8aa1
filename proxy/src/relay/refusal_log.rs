//! Refused clients, logged without flooding the log: the first refusal of a kind (a
//! [`Refusal`] variant: too many connections, upstream unreachable, a silent client, a
//! client that does not trust the certificate...) is logged in full, the ones after it for [`QUIET`] are only counted,
//! and one line then says how many there were and why the last one was refused. A thousand
//! clients over `max_connections` make two lines, not a thousand.

use std::collections::HashMap;
use std::mem::Discriminant;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::error::Refusal;
use crate::sync::locked;

/// How long refusals of a kind are counted rather than logged, after one that was.
pub(super) const QUIET: Duration = Duration::from_secs(10);

/// Refusals being counted, by kind.
#[derive(Default)]
pub(crate) struct RefusalLog {
    quiet: Mutex<HashMap<Discriminant<Refusal>, Quiet>>,
}

/// Refusals of one kind since one was logged.
struct Quiet {
    /// Their MySQL error code, for the line that sums them up.
    code: u16,
    until: Instant,
    since: Instant,
    more: u64,
    last: String,
}

impl RefusalLog {
    /// Whether `refusal` should be logged in full now; if not, it is counted, `why` kept for
    /// the line that sums them up.
    pub(super) fn log_in_full(&self, refusal: &Refusal, why: impl FnOnce() -> String) -> bool {
        let now = Instant::now();
        let kind = std::mem::discriminant(refusal);
        let mut quiet = locked(&self.quiet);
        if let Some(q) = quiet.get_mut(&kind)
            && now < q.until
        {
            q.more += 1;
            q.last = why();
            return false;
        }
        let fresh = Quiet { code: refusal.code(), until: now + QUIET, since: now, more: 0, last: String::new() };
        if let Some(ended) = quiet.insert(kind, fresh) {
            ended.sum_up();
        }
        true
    }

    /// Sums up the counts whose quiet time is over (all of them when `all`).
    pub(super) fn sum_up(&self, all: bool) {
        let now = Instant::now();
        let mut quiet = locked(&self.quiet);
        quiet.retain(|_, q| {
            let over = all || q.until <= now;
            if over {
                q.sum_up();
            }
            !over
        });
    }
}

impl Quiet {
    fn sum_up(&self) {
        if self.more > 0 {
            let secs = self.since.elapsed().as_secs().max(1);
            tracing::warn!(
                code = self.code,
                refused = self.more,
                "refused {} more clients in the last {secs} s, the last: {}",
                self.more,
                self.last
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_refusal_of_a_kind_is_logged_then_the_rest_are_counted_for_the_quiet_time() {
        let log = RefusalLog::default();
        let full = Refusal::TooManyConnections { max: 1 };
        assert!(log.log_in_full(&full, || "full".into()));
        assert!(!log.log_in_full(&full, || "full".into()), "counted, not logged");
        // Same code (1040), another kind: logged.
        assert!(log.log_in_full(&Refusal::FdLimit { limit: 1 }, || "fds".into()), "another kind is logged");
        tokio::time::advance(QUIET).await;
        assert!(log.log_in_full(&full, || "full".into()), "logged again once the quiet time is over");
        log.sum_up(true);
        assert!(log.quiet.lock().unwrap().is_empty());
    }
}
