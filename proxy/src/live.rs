//! The live view of open connections: who each one is, what it is doing
//! now, and the latest kernel readings of its sockets. Each connection's own
//! task writes its entry without ever waiting (atomics, and `try_lock` on
//! the few fields that are not numbers); `/connections` reads them. It does
//! not depend on recording: with `record.enabled: false` it still works.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::protocol::Identity;
use crate::socket::LinkSample;
use crate::sync::locked;

/// One open connection, as its task last described it.
#[derive(Debug)]
pub struct LiveConnection {
    /// rttscope's connection id.
    pub id: u64,
    /// The client's address, as logs show it.
    pub client: String,
    /// When the client connected, µs since the recording epoch.
    pub opened_us: u64,
    /// The command byte in flight plus one; 0 when idle.
    current_command: AtomicU64,
    current_since_us: AtomicU64,
    /// Commands started so far: which one is in flight.
    commands_started: AtomicU64,
    /// The statement in flight (its normalised text), when recording knows it: the one
    /// stored here, if `statement_of` names the command in flight. A connection that runs
    /// one statement again and again keeps it stored and only moves `statement_of` on: no
    /// lock per command.
    statement: Mutex<Option<Arc<str>>>,
    statement_of: AtomicU64,
    identity: Mutex<Identity>,
    link: Mutex<Option<LiveLink>>,
    legs: Mutex<Option<Legs>>,
}

/// The latest readings of a connection's two sockets.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct LiveLink {
    /// When they were taken, µs since the recording epoch.
    pub at_us: u64,
    /// The long-haul socket to the server.
    pub upstream: LinkSample,
    /// The client's socket (none for a Unix socket).
    pub client: Option<LinkSample>,
}

/// The protocol version and cipher suite a TLS leg negotiated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsInfo {
    /// `TLSv1.3` or `TLSv1.2`.
    pub version: String,
    /// The IANA name of the cipher suite.
    pub cipher: String,
}

impl TlsInfo {
    /// Round trips its handshake took: TLS 1.3 one (the client's first flight carries its key
    /// share), TLS 1.2 two. The SSLRequest before it waits for nothing.
    pub fn handshake_round_trips(&self) -> u32 {
        if self.version == "TLSv1.2" { 2 } else { 1 }
    }
}

/// How each leg of a connection is carried, fixed at login.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Legs {
    /// TLS between the client and rttscope, if any.
    pub client_tls: Option<TlsInfo>,
    /// TLS between rttscope and the server, if any.
    pub upstream_tls: Option<TlsInfo>,
    /// Compression between the client and rttscope (`zlib`, `zstd (level 3)`), if any.
    pub client_compression: Option<String>,
    /// Compression between rttscope and the server, if any.
    pub upstream_compression: Option<String>,
    /// The client library, from the connection attributes (`libmariadb 3.3.8`), if it said.
    pub client_library: Option<String>,
    /// The program, from the connection attributes (`program_name`: `mysql` for the CLI), if it
    /// said.
    #[serde(default)]
    pub client_program: Option<String>,
}

/// What a connection is doing now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlight {
    /// The command byte.
    pub command: u8,
    /// Since when, µs since the recording epoch.
    pub since_us: u64,
    /// Its statement, normalised, when recording is on and it has SQL.
    pub statement: Option<Arc<str>>,
}

impl LiveConnection {
    /// A connection that just arrived: nobody yet, doing nothing.
    pub fn new(id: u64, client: String, opened_us: u64) -> LiveConnection {
        LiveConnection {
            id,
            client,
            opened_us,
            current_command: AtomicU64::new(0),
            current_since_us: AtomicU64::new(0),
            commands_started: AtomicU64::new(0),
            statement: Mutex::new(None),
            statement_of: AtomicU64::new(0),
            identity: Mutex::new(Identity::default()),
            link: Mutex::new(None),
            legs: Mutex::new(None),
        }
    }

    /// How the legs are carried: set once, at login.
    pub fn set_legs(&self, legs: Legs) {
        *locked(&self.legs) = Some(legs);
    }

    /// How the legs are carried, once logged in.
    pub fn legs(&self) -> Option<Legs> {
        self.legs.lock().map(|l| l.clone()).unwrap_or(None)
    }

    /// A command began at `since_us`.
    pub fn command_started(&self, command: u8, since_us: u64) {
        self.current_since_us.store(since_us, Ordering::Relaxed);
        self.current_command.store(u64::from(command) + 1, Ordering::Relaxed);
        // One writer (the connection's task): no read-modify-write needed.
        self.commands_started.store(self.commands_started.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Nothing is in flight any more.
    pub fn idle(&self) {
        self.current_command.store(0, Ordering::Relaxed);
    }

    /// The statement the command in flight runs. Skipped, not waited for, if a reader holds
    /// the lock: returns whether it was stored.
    pub fn set_statement(&self, text: &Arc<str>) -> bool {
        let Ok(mut statement) = self.statement.try_lock() else { return false };
        *statement = Some(text.clone());
        self.statement_of.store(self.commands_started.load(Ordering::Relaxed), Ordering::Relaxed);
        true
    }

    /// The command in flight runs the statement stored last (which the caller knows it set).
    pub fn same_statement(&self) {
        self.statement_of.store(self.commands_started.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// The command in flight, if any.
    pub fn in_flight(&self) -> Option<InFlight> {
        let command = self.current_command.load(Ordering::Relaxed).checked_sub(1)?;
        let since_us = self.current_since_us.load(Ordering::Relaxed);
        let current = self.commands_started.load(Ordering::Relaxed) == self.statement_of.load(Ordering::Relaxed);
        let statement = if current { self.statement.lock().map(|s| s.clone()).unwrap_or(None) } else { None };
        Some(InFlight { command: command as u8, since_us, statement })
    }

    /// Who the connection is now (user and default schema).
    pub fn set_identity(&self, identity: &Identity) {
        locked(&self.identity).clone_from(identity);
    }

    /// The connection's user and default schema.
    pub fn identity(&self) -> Identity {
        locked(&self.identity).clone()
    }

    /// New socket readings. `try_lock` never waits: if a reader holds the
    /// lock, this reading is skipped.
    pub fn publish(&self, link: LiveLink) {
        if let Ok(mut slot) = self.link.try_lock() {
            *slot = Some(link);
        }
    }

    /// The latest socket readings.
    pub fn link(&self) -> Option<LiveLink> {
        self.link.lock().map(|l| *l).unwrap_or(None)
    }
}

/// Every open connection. Locked only when a connection opens or closes,
/// and by readers; never on the forwarding path.
#[derive(Debug, Default)]
pub struct LiveRegistry {
    connections: Mutex<BTreeMap<u64, Arc<LiveConnection>>>,
}

impl LiveRegistry {
    /// Lists `connection` until the returned guard is dropped.
    pub fn register(self: &Arc<Self>, connection: Arc<LiveConnection>) -> Registered {
        let id = connection.id;
        self.lock().insert(id, connection);
        Registered { registry: self.clone(), id }
    }

    /// The open connections, oldest first.
    pub fn snapshot(&self) -> Vec<Arc<LiveConnection>> {
        self.lock().values().cloned().collect()
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<LiveConnection>>> {
        locked(&self.connections)
    }
}

/// A connection's place in the registry; removed when dropped, so a
/// connection that ends in any way (an error, a panic, an abort at
/// shutdown) is never listed as open.
#[derive(Debug)]
pub struct Registered {
    registry: Arc<LiveRegistry>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_listed_until_its_guard_drops() {
        let registry = Arc::new(LiveRegistry::default());
        let guard = registry.register(Arc::new(LiveConnection::new(7, "127.0.0.1:5000".into(), 10)));
        assert_eq!(registry.snapshot().iter().map(|c| c.id).collect::<Vec<_>>(), [7]);
        drop(guard);
        assert!(registry.is_empty());
    }

    #[test]
    fn the_command_in_flight_and_its_statement() {
        let live = LiveConnection::new(1, "c".into(), 0);
        assert_eq!(live.in_flight(), None);
        live.command_started(0x03, 42);
        live.set_statement(&Arc::from("select ?"));
        let now = live.in_flight().expect("in flight");
        assert_eq!((now.command, now.since_us, now.statement.as_deref()), (0x03, 42, Some("select ?")));
        live.command_started(0x0e, 50);
        assert_eq!(live.in_flight().and_then(|f| f.statement), None, "a new command forgets the old statement");
        live.command_started(0x03, 60);
        live.same_statement();
        assert_eq!(live.in_flight().and_then(|f| f.statement).as_deref(), Some("select ?"), "the same one again");
        live.idle();
        assert_eq!(live.in_flight(), None);
    }
}
