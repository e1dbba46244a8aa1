//! What clients that have not logged in yet may take. In MySQL the server speaks first, so
//! every accepted client costs a server connection (and one of the server's
//! `max_connections`) before it has said a word. Three bounds keep sockets that say nothing
//! from eating them:
//!
//! - at most `limits.max_connecting` connections are in the connection phase at once, from
//!   the dial to the end of the login ([`Gate::enter`]); a newcomer past it waits for a
//!   slot for up to `limits.connect_timeout`;
//! - a client has `limits.first_byte_timeout` to answer the greeting;
//! - while newcomers wait, a client that has kept rttscope waiting for
//!   [`CONTENDED_GRACE`] or more gives its slot up ([`Gate::contended`]), so a burst of silent
//!   sockets is worked through at the pace of the grace, not of the timeouts.
//!
//! Why not greet from a cached greeting and dial only once the client answers: the greeting
//! carries the server's connection id, which clients use to cancel (`KILL QUERY <id>` from a
//! second connection: the `mariadb` CLI's Ctrl-C, JDBC's `Statement.cancel`), so a made-up id
//! would cancel nothing or someone else's query; and its scramble, which the client signs,
//! so every login would need a forced auth switch to the real one: one more round trip on
//! the long hop for each login, on an emulated link too.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::timers;

/// How long a client may keep rttscope waiting, in the connection phase, while newcomers
/// wait for its slot. Clients answer a greeting within a round trip of their own network and
/// a TLS handshake within a few: a quarter second is many of those, and works through 64
/// silent sockets four times a second.
pub(super) const CONTENDED_GRACE: Duration = Duration::from_millis(250);

/// The slots of the connection phase.
pub(crate) struct Gate {
    slots: Arc<Semaphore>,
    /// Newcomers waiting for a slot now.
    waiting: AtomicUsize,
    /// Woken when a newcomer starts to wait.
    newcomer: Notify,
}

/// A connection's place in the connection phase, given back when dropped.
pub(super) struct Slot {
    _permit: OwnedSemaphorePermit,
}

impl Gate {
    /// `max` slots.
    pub(super) fn new(max: u32) -> Gate {
        Gate { slots: Arc::new(Semaphore::new(max as usize)), waiting: AtomicUsize::new(0), newcomer: Notify::new() }
    }

    /// A slot, waiting for one at most `within`; `None` when none came.
    pub(super) async fn enter(&self, within: Duration) -> Option<Slot> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Some(Slot { _permit: permit });
        }
        let _waiting = Waiting::start(self);
        self.newcomer.notify_waiters();
        match timers::timeout(within, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Some(Slot { _permit: permit }),
            _ => None,
        }
    }

    /// Completes once a newcomer waits for a slot and the client has kept this connection
    /// waiting since `since` for [`CONTENDED_GRACE`]: the slot is better given to it. Never
    /// completes while nobody waits.
    pub(super) async fn contended(&self, since: Instant) {
        let yield_at = since + CONTENDED_GRACE;
        loop {
            let newcomer = self.newcomer.notified();
            tokio::pin!(newcomer);
            // Registered before the count is read: a newcomer that starts to wait in
            // between still wakes this one.
            newcomer.as_mut().enable();
            if self.waiting.load(Ordering::Acquire) > 0 {
                timers::sleep_until(yield_at).await;
                if self.waiting.load(Ordering::Acquire) > 0 {
                    return;
                }
                continue;
            }
            newcomer.await;
        }
    }
}

/// One newcomer on the waiting count, for as long as it waits.
struct Waiting<'a>(&'a Gate);

impl<'a> Waiting<'a> {
    fn start(gate: &'a Gate) -> Waiting<'a> {
        gate.waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(gate)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_newcomer_waits_for_a_slot_and_gives_up_after_its_deadline() {
        let gate = Gate::new(1);
        let held = gate.enter(Duration::from_secs(1)).await.expect("a free slot");
        let started = Instant::now();
        assert!(gate.enter(Duration::from_secs(1)).await.is_none(), "no slot while one is held");
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        drop(held);
        assert!(gate.enter(Duration::from_secs(1)).await.is_some(), "the slot is free again");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_is_contended_only_while_a_newcomer_waits_and_after_the_grace() {
        let gate = Arc::new(Gate::new(1));
        let _held = gate.enter(Duration::from_secs(1)).await.unwrap();
        let since = Instant::now();
        let uncontended = timers::timeout(Duration::from_secs(5), gate.contended(since)).await;
        assert!(uncontended.is_err(), "nobody waits: never contended");

        let since = Instant::now();
        let newcomer = tokio::spawn({
            let gate = gate.clone();
            async move { gate.enter(Duration::from_secs(10)).await.is_some() }
        });
        gate.contended(since).await;
        assert_eq!(since.elapsed(), CONTENDED_GRACE, "given up after the grace, not before");
        drop(_held);
        assert!(newcomer.await.unwrap(), "the newcomer gets the slot given up");
    }
}
