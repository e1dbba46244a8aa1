//! The boxes command records travel in, handed back by the collector once it has read
//! them. A record is allocated on a connection thread and read on the collector's: a fresh
//! box for each one made the allocator take the slow path on both threads (a free from
//! another thread's arena, then a malloc its cache could not serve), about 400
//! instructions per command (callgrind, `scripts/bench.sh --only f`). Bounded: past
//! [`KEPT`] boxes waiting, the collector frees them instead.

use std::sync::{Arc, LazyLock};

use crossbeam_queue::ArrayQueue;

use super::CommandRecord;
use crate::fingerprint::FingerprintId;

/// Boxes kept for reuse, a few hundred bytes each: the most commands the collector reads
/// in a couple of batches.
const KEPT: usize = 1024;

static FREE: LazyLock<ArrayQueue<Box<CommandRecord>>> = LazyLock::new(|| ArrayQueue::new(KEPT));

/// A new record ([`CommandRecord::new`]) in a box, a used one if the collector has handed
/// one back (rewritten in place: [`CommandRecord::reset`]).
pub fn boxed(
    conn_id: u64,
    command: u8,
    fingerprint: FingerprintId,
    text: Arc<str>,
    request_us: u64,
) -> Box<CommandRecord> {
    match FREE.pop() {
        Some(mut used) => {
            used.reset(conn_id, command, fingerprint, text, request_us);
            used
        }
        None => Box::new(CommandRecord::new(conn_id, command, fingerprint, text, request_us)),
    }
}

/// A box the collector is done with, for the next record (freed if enough are waiting).
pub fn recycle(record: Box<CommandRecord>) {
    let _ = FREE.push(record);
}
